"""Seeded text mixing Chinese, English and emoji, with characters that need HTML escaping."""

from __future__ import annotations

import html
import random

CHINESE = (
    "分布式爬虫",
    "机器学习",
    "咖啡",
    "程序员",
    "深度学习",
    "城市生活",
    "读书笔记",
    "开源项目",
    "数据分析",
    "旅行",
    "职业规划",
    "产品设计",
    "猫咪",
    "考研",
    "健身",
)
ENGLISH = (
    "Python",
    "Scrapy",
    "Redis",
    "Kafka",
    "deep learning",
    "open source",
    "latte",
    "API",
    "C++ & Rust",
    "<3 startups",
    'the "best" way',
    "it's fine",
)
EMOJI = ("😂", "🤔", "👍", "🔥", "☕", "🐍", "🚀", "❤️", "🕷️", "🎉", "🐱", "📚")
QUESTION_FORMS = (
    "如何评价{a}和{b}？",
    "为什么{a}越来越火？{e}",
    "有哪些值得推荐的{a}资源？",
    "How do you learn {a} with {b}?",
    "{a}是一种怎样的体验？",
    "作为{a}新手，应该先学{b}吗 {e}",
)
PLACES = ("北京", "上海", "广东", "吉林", "浙江", "四川", "海外", "湖北", "江苏")
SURNAMES = ("张", "王", "李", "陈", "Lily", "Tom", "小", "阿")
GIVEN = ("三", "明", "Coder", "猫", "喵", "bytes", "一", "小鱼", "Ada")


class TextMaker:
    """All text of one generated data set; every choice comes from the given ``random.Random``."""

    def __init__(self, rng: random.Random, keywords: tuple[str, ...]) -> None:
        self.rng = rng
        self.keywords = keywords

    def phrase(self) -> str:
        pool = CHINESE if self.rng.random() < 0.6 else ENGLISH
        return self.rng.choice(pool)

    def emoji(self) -> str:
        return self.rng.choice(EMOJI)

    def sentence(self, words: int) -> str:
        parts = [self.phrase() for _ in range(words)]
        if self.rng.random() < 0.5:
            parts.insert(self.rng.randrange(len(parts) + 1), self.emoji())
        return "，".join(parts) + self.rng.choice(("。", "！", "?", " …"))

    def with_keyword(self, text: str, index: int) -> str:
        """Every other object carries a search keyword (round robin), so searches find them."""
        if not self.keywords or index % 2:
            return text
        return f"{self.keywords[(index // 2) % len(self.keywords)]} · {text}"

    def question_title(self, index: int) -> str:
        form = self.rng.choice(QUESTION_FORMS)
        return self.with_keyword(
            form.format(a=self.phrase(), b=self.phrase(), e=self.emoji()), index
        )

    def title(self, index: int) -> str:
        return self.with_keyword(f"{self.phrase()}：{self.sentence(2)}", index)

    def paragraphs_html(self, count: int) -> str:
        """HTML paragraphs shaped like Zhihu's: ``<p data-pid="...">``."""
        paragraphs = []
        for _ in range(count):
            pid = "".join(self.rng.choice("abcdefghijkmnpqrstuvwxyzABCDEFGH") for _ in range(8))
            text = html.escape(self.sentence(self.rng.randint(3, 9)), quote=False)
            if self.rng.random() < 0.2:
                text += f" <b>{html.escape(self.phrase(), quote=False)}</b>"
            paragraphs.append(f'<p data-pid="{pid}">{text}</p>')
        return "".join(paragraphs)

    def comment_html(self) -> str:
        text = html.escape(self.sentence(self.rng.randint(1, 4)), quote=False)
        if self.rng.random() < 0.15:
            text += " [赞同]"
        return text

    def name(self) -> str:
        return self.rng.choice(SURNAMES) + self.rng.choice(GIVEN) + self.rng.choice(("", *EMOJI))

    def headline(self, index: int) -> str:
        return self.with_keyword(f"{self.phrase()} / {self.phrase()}", index)

    def place(self) -> str:
        return self.rng.choice(PLACES)


def excerpt_of(content_html: str, length: int = 100) -> str:
    """Plain text of the first ``length`` characters, as Zhihu's ``excerpt``."""
    text = html.unescape(_strip_tags(content_html))
    return text if len(text) <= length else text[:length] + "…"


def _strip_tags(markup: str) -> str:
    out: list[str] = []
    inside = False
    for char in markup:
        if char == "<":
            inside = True
        elif char == ">":
            inside = False
        elif not inside:
            out.append(char)
    return "".join(out)
