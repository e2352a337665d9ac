"""Generation of the content from one ``random.Random(seed)``: one seed, one data set."""

from __future__ import annotations

import random
from collections import defaultdict

from tests.zhihu_mock.config import DataConfig
from tests.zhihu_mock.records import (
    ANONYMOUS,
    ROOT,
    Answer,
    Article,
    Comment,
    ContentType,
    EntryKind,
    MockData,
    Person,
    Question,
    SearchEntry,
    Topic,
    Zvideo,
)
from tests.zhihu_mock.text import TextMaker

START = 1_500_000_000  # 2017-07
END = 1_760_000_000  # 2025-10
# where search results get entries a crawler must skip
_AD_POSITIONS: tuple[tuple[int, EntryKind], ...] = ((2, "koc_box"), (9, "knowledge_ad"))


def generate(config: DataConfig) -> MockData:
    """Builds the whole data set from ``config.seed``."""
    return _Generator(config).run()


class _Generator:
    def __init__(self, config: DataConfig) -> None:
        self.config = config
        self.rng = random.Random(config.seed)
        self.text = TextMaker(self.rng, config.search_keywords)
        self.used: set[str] = set()
        self.comments: dict[str, Comment] = {}
        self.tokens: list[str] = []  # url_tokens of the people, in creation order

    def new_id(self, digits: int) -> str:
        high = 2**63 - 1 if digits == 19 else 10**digits  # 19-digit ids still fit an int64
        while True:
            value = str(self.rng.randrange(10 ** (digits - 1), high))
            if value not in self.used:
                self.used.add(value)
                return value

    def when(self, after: int) -> int:
        return min(END, after + self.rng.randint(60, 86_400 * 90))

    def count(self, scale: float) -> int:
        return int(self.rng.paretovariate(1.2) * scale) - int(scale)

    def image(self) -> str:
        return f"https://picx.zhimg.com/v2-{self.rng.getrandbits(128):032x}_720w.jpg"

    def run(self) -> MockData:
        people = [self.person(i) for i in range(self.config.people)]
        tokens = self.tokens = [p.url_token for p in people]
        questions: list[Question] = []
        answers: list[Answer] = []
        for index, spec in enumerate(self.config.questions):
            question, its_answers = self.question(index, spec.answers, tokens)
            questions.append(question)
            answers.extend(its_answers)
            self.spread_comments(
                [("answer", a.id, a.created_time) for a in its_answers], spec.comments
            )
        articles = [self.article(i, tokens) for i in range(self.config.articles)]
        zvideos = [self.zvideo(i, tokens) for i in range(self.config.zvideos)]
        self.spread_comments(
            [("article", a.id, a.created) for a in articles], self.config.article_comments
        )
        self.spread_comments(
            [("zvideo", z.id, z.created_at) for z in zvideos], self.config.zvideo_comments
        )
        data = MockData(
            people={p.url_token: p for p in people},
            questions={q.id: q for q in questions},
            answers={a.id: a for a in answers},
            articles={a.id: a for a in articles},
            zvideos={z.id: z for z in zvideos},
            comments=self.comments,
            search={},
        )
        data.search = {kw: self.search_entries(data, kw) for kw in self.config.search_keywords}
        return data

    def person(self, index: int) -> Person:
        while True:
            stem = self.rng.choice(("coder", "mao", "lily", "spider", "latte", "ada", "xiaoyu"))
            token = f"{stem}-{self.rng.getrandbits(16):04x}"
            if token not in self.used:
                self.used.add(token)
                break
        return Person(
            id=f"{self.rng.getrandbits(128):032x}",
            url_token=token,
            name=self.text.name(),
            headline=self.text.headline(index),
            gender=self.rng.choice((-1, 0, 1)),
            avatar_url=f"https://picx.zhimg.com/v2-{self.rng.getrandbits(64):016x}_l.jpg",
            is_org=self.rng.random() < 0.07,
            follower_count=self.count(300),
            following_count=self.rng.randint(0, 800),
            voteup_count=self.count(2000),
            ip_location=self.text.place(),
        )

    def question(
        self, index: int, answer_count: int, tokens: list[str]
    ) -> tuple[Question, list[Answer]]:
        qid = self.new_id(self.rng.choice((9, 19)))
        created = self.rng.randint(START, END - 86_400 * 400)
        answers = []
        for _ in range(answer_count):
            anonymous = self.rng.random() < self.config.anonymous_share
            answer_created = self.when(created)
            content = self.text.paragraphs_html(self.rng.randint(1, 5))
            answers.append(
                Answer(
                    id=self.new_id(self.rng.choice((10, 19))),
                    question_id=qid,
                    author=ANONYMOUS if anonymous else self.rng.choice(tokens),
                    content=content,
                    created_time=answer_created,
                    updated_time=self.when(answer_created),
                    voteup_count=self.count(50),
                    thanks_count=self.count(5),
                    ip_info=self.text.place(),
                    is_collapsed=self.rng.random() < 0.02,
                )
            )
        topics = tuple(
            Topic(id=self.new_id(8), name=self.text.phrase()) for _ in range(self.rng.randint(1, 3))
        )
        question = Question(
            id=qid,
            title=self.text.question_title(index),
            detail=self.text.paragraphs_html(self.rng.randint(0, 2)),
            author=self.rng.choice(tokens),
            created=created,
            updated_time=self.when(created),
            follower_count=self.count(100),
            visit_count=self.count(10_000),
            topics=topics,
            answer_ids=tuple(a.id for a in answers),
        )
        return question, answers

    def article(self, index: int, tokens: list[str]) -> Article:
        created = self.rng.randint(START, END - 86_400 * 100)
        return Article(
            id=self.new_id(self.rng.choice((9, 19))),
            title=self.text.title(index),
            author=self.rng.choice(tokens),
            content=self.text.paragraphs_html(self.rng.randint(2, 8)),
            created=created,
            updated=self.when(created),
            voteup_count=self.count(80),
            image_url=self.image() if self.rng.random() < 0.6 else "",
            ip_info=self.text.place(),
        )

    def zvideo(self, index: int, tokens: list[str]) -> Zvideo:
        created = self.rng.randint(START, END - 86_400 * 100)
        return Zvideo(
            id=self.new_id(19),
            title=self.text.title(index),
            description=self.text.sentence(4),
            author=self.rng.choice(tokens),
            created_at=created,
            updated_at=self.when(created),
            duration=self.rng.randint(15, 1800),
            play_count=self.count(5000),
            voteup_count=self.count(60),
            image_url=self.image(),
        )

    def spread_comments(self, contents: list[tuple[ContentType, str, int]], total: int) -> None:
        """Spreads ``total`` comments unevenly over ``contents``; about a third get none."""
        if not contents or not total:
            return
        eligible = [c for c in contents if self.rng.random() < 0.7] or contents[:1]
        weights = [self.rng.paretovariate(1.2) for _ in eligible]
        picks = self.rng.choices(range(len(eligible)), weights, k=total)
        per_content = [picks.count(i) for i in range(len(eligible))]
        for (kind, object_id, created), count in zip(eligible, per_content, strict=True):
            self.thread(kind, object_id, created, count)

    def thread(self, kind: ContentType, content_id: str, created: int, count: int) -> None:
        roots: list[Comment] = []
        replies: dict[str, list[Comment]] = defaultdict(list)
        for _ in range(count):
            if not roots or self.rng.random() < 0.5:
                parent: Comment | None = None
                root_id = reply_id = ROOT
                after = created
            else:
                root = self.rng.choice(roots)
                parent = self.rng.choice([root, *replies[root.id]])
                root_id, reply_id, after = root.id, parent.id, parent.created_time
            likes = self.count(3)
            comment = Comment(
                id=self.new_id(11),
                content_type=kind,
                content_id=content_id,
                root_id=root_id,
                reply_id=reply_id,
                author=self.rng.choice(self.tokens),
                reply_to_author=parent.author if parent else "",
                content=self.text.comment_html(),
                created_time=self.when(after),
                like_count=likes,
                dislike_count=self.rng.randint(0, 2),
                score=likes * 10 + self.rng.randint(0, 9),
                ip_info=self.text.place(),
            )
            self.comments[comment.id] = comment
            (roots if parent is None else replies[root_id]).append(comment)

    def search_entries(self, data: MockData, keyword: str) -> tuple[SearchEntry, ...]:
        found: list[tuple[str, str]] = []
        for question in data.questions.values():
            if keyword in question.title:
                found.append(("question", question.id))
                found.extend(("answer", aid) for aid in question.answer_ids[:6])
        found.extend(("article", a.id) for a in data.articles.values() if keyword in a.title)
        found.extend(("zvideo", z.id) for z in data.zvideos.values() if keyword in z.title)
        found.extend(("people", p.url_token) for p in data.people.values() if keyword in p.headline)
        self.rng.shuffle(found)
        entries = [
            SearchEntry("search_result", f"{self.rng.getrandbits(64):016x}", kind, object_id)
            for kind, object_id in found
        ]
        for position, kind in _AD_POSITIONS:  # every keyword gets both, short lists at the end
            ad_id = f"{self.rng.getrandbits(64):016x}"
            entries.insert(min(position, len(entries)), SearchEntry(kind, ad_id, "", ""))
        return tuple(entries)
