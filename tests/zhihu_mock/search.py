"""search_v3 entries: results with ``<em>`` highlights, and the boxes and ads to skip."""

from __future__ import annotations

import html

from tests.zhihu_mock.objects import JSON, Shapes
from tests.zhihu_mock.records import SearchEntry
from tests.zhihu_mock.text import excerpt_of
from tests.zhihu_mock.variety import SearchForm


def highlight(text: str, keyword: str) -> str:
    """HTML-escaped text with the keyword wrapped in ``<em>``, as search answers it."""
    escaped, key = html.escape(text, quote=False), html.escape(keyword, quote=False)
    return escaped.replace(key, f"<em>{key}</em>") if key else escaped


class SearchShapes:
    """Renders the entries of one keyword's results with the objects of ``shapes``."""

    def __init__(self, shapes: Shapes, forms: dict[str, SearchForm] | None = None) -> None:
        self.shapes = shapes
        self.forms = forms or {}  # entry id -> rendering of answer results (Variety)

    def item(self, entry: SearchEntry, keyword: str, index: int) -> JSON:
        if entry.kind == "koc_box":
            box = {"title": f"{keyword} 相关好物", "items": [], "attached_info": ""}
            return {"type": "koc_box", "id": entry.id, "object": box}
        if entry.kind == "knowledge_ad":
            ad = {
                "header": {"card_title": "知乎知学堂", "no_feedback": False},
                "body": {"title": f"{keyword}入门课 🎓", "description": "限时免费", "authors": []},
                "commodity_type": "course",
                "url": "https://www.zhihu.com/xen/market/training",
            }
            return {"type": "knowledge_ad", "id": entry.id, "object": ad}
        if entry.kind == "relevant_query":
            queries = [{"query": f"{keyword} 教程", "id": f"{index}"}]
            return {"type": "relevant_query", "id": entry.id, "object": {"queries": queries}}
        found, title, description = self._found(entry, keyword)
        form = self.forms.get(entry.id, "plain")
        if form == "wrapped":
            found = {"type": "feed_card", "target": found, "attached_info": ""}
        elif form == "broken":
            found = {k: v for k, v in found.items() if k != "id"}
        return {
            # the site answers some videos as entries of their own type (docs: keep those too)
            "type": "zvideo"
            if entry.object_type == "zvideo" and index % 2 == 0
            else "search_result",
            "id": entry.id,
            "index": index,
            "highlight": {"title": title, "description": description},
            "object": found,
            "hit_labels": None,
        }

    def _found(self, entry: SearchEntry, keyword: str) -> tuple[JSON, str, str]:
        """The object of a search result, its highlighted title and description."""
        data, kind, object_id = self.shapes.data, entry.object_type, entry.object_id
        if kind == "roundtable":
            table = {"type": "roundtable", "id": object_id, "name": f"{keyword} 圆桌"}
            return table, highlight(table["name"], keyword), ""
        if kind == "people":
            member = self.shapes.member(data.people[object_id])
            headline = highlight(member["headline"], keyword)
            return member | {"headline": headline}, highlight(member["name"], keyword), headline
        if kind == "question":
            question = data.questions[object_id]
            title = highlight(question.title, keyword)
            excerpt = highlight(excerpt_of(question.detail), keyword)
            extra = {"title": title, "excerpt": excerpt, "created_time": question.created}
            return self.shapes.question(question) | extra, title, excerpt
        if kind == "zvideo":
            zvideo = data.zvideos[object_id]
            title = highlight(zvideo.title, keyword)
            description = highlight(zvideo.description, keyword)
            return self.shapes.zvideo(zvideo) | {"title": title}, title, description
        if kind == "article":
            article = data.articles[object_id]
            title = highlight(article.title, keyword)
            excerpt = highlight(excerpt_of(article.content), keyword)
            extra = {
                "title": title,
                "excerpt": excerpt,
                "created_time": article.created,
                "updated_time": article.updated,
            }
            return self.shapes.article(article) | extra, title, excerpt
        answer = data.answers[object_id]
        question = data.questions[answer.question_id]
        title = highlight(question.title, keyword)
        excerpt = highlight(excerpt_of(answer.content), keyword)
        brief = {
            "id": question.id,
            "name": title,
            "url": f"{self.shapes.base}/api/v4/questions/{question.id}",
            "type": "question",
        }
        return self.shapes.answer(answer) | {"question": brief, "excerpt": excerpt}, title, excerpt
