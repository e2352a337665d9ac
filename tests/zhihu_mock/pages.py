"""HTML pages whose ``js-initialData`` script holds the page's objects in camelCase."""

from __future__ import annotations

import html
import secrets
import time
from typing import Any

import orjson

from tests.zhihu_mock.messages import Request, Response, html_response
from tests.zhihu_mock.objects import JSON, Shapes, camel_case
from tests.zhihu_mock.records import ANONYMOUS, MockData

FIRST_ANSWERS = 5  # answers embedded in a question page; the rest come from the API
D_C0_MAX_AGE = 2 * 365 * 86_400
ENTITY_KINDS = ("users", "questions", "answers", "articles", "zvideos")


def render_page(title: str, entities: dict[str, dict[str, JSON]], state: JSON | None = None) -> str:
    """A page with ``<script id="js-initialData" type="text/json">`` (``<`` escaped inside)."""
    initial_state: JSON = {
        "entities": {kind: camel_case(entities.get(kind, {})) for kind in ENTITY_KINDS},
        **camel_case(state or {}),
    }
    payload = orjson.dumps({"initialState": initial_state, "subAppName": "main"}).decode()
    script = payload.replace("<", "\\u003c")
    escaped = html.escape(title)
    return (
        '<!doctype html><html lang="zh"><head><meta charset="utf-8">'
        f"<title>{escaped} - 知乎</title></head><body>"
        f'<div id="root"><main><h1 class="ContentItem-title">{escaped}</h1></main></div>'
        f'<script id="js-initialData" type="text/json">{script}</script></body></html>'
    )


class Pages:
    """One method per page; unknown ids answer ``None`` (the server turns that into a 404)."""

    def __init__(self, data: MockData) -> None:
        self.data = data

    def _users(self, shapes: Shapes, *tokens: str) -> dict[str, JSON]:
        return {
            token: shapes.member(self.data.people[token]) for token in tokens if token != ANONYMOUS
        }

    def question(self, request: Request, qid: str, aid: str | None = None) -> Response | None:
        question = self.data.questions.get(qid)
        if question is None or (aid is not None and aid not in question.answer_ids):
            return None
        shapes = Shapes(self.data, request.base_url)
        shown = [aid] if aid is not None else list(question.answer_ids[:FIRST_ANSWERS])
        answers = {a: shapes.answer(self.data.answers[a]) for a in shown}
        authors = [question.author, *(self.data.answers[a].author for a in shown)]
        api_next = (
            f"{request.base_url}/api/v4/questions/{qid}/feeds?limit=5&offset={len(shown)}"
            "&order=default&platform=desktop"
        )
        state = {
            "question": {
                "answers": {
                    qid: {
                        "ids": shown,
                        "is_end": len(shown) >= len(question.answer_ids),
                        "next": api_next,
                        "totals": len(question.answer_ids),
                    }
                }
            }
        }
        entities = {
            "questions": {qid: shapes.question(question)},
            "answers": answers,
            "users": self._users(shapes, *authors),
        }
        return html_response(render_page(question.title, entities, state))

    def answer(self, request: Request, aid: str) -> Response | None:
        answer = self.data.answers.get(aid)
        return None if answer is None else self.question(request, answer.question_id, aid)

    def article(self, request: Request, article_id: str) -> Response | None:
        article = self.data.articles.get(article_id)
        if article is None:
            return None
        shapes = Shapes(self.data, request.base_url)
        entities = {
            "articles": {article.id: shapes.article(article)},
            "users": self._users(shapes, article.author),
        }
        return html_response(render_page(article.title, entities))

    def zvideo(self, request: Request, zvideo_id: str) -> Response | None:
        zvideo = self.data.zvideos.get(zvideo_id)
        if zvideo is None:
            return None
        shapes = Shapes(self.data, request.base_url)
        entities = {
            "zvideos": {zvideo.id: shapes.zvideo(zvideo)},
            "users": self._users(shapes, zvideo.author),
        }
        return html_response(render_page(zvideo.title, entities))

    def people(self, request: Request, url_token: str) -> Response | None:
        person = self.data.people.get(url_token)
        if person is None:
            return None
        shapes = Shapes(self.data, request.base_url)
        return html_response(render_page(person.name, {"users": self._users(shapes, url_token)}))

    def explore(self, request: Request) -> Response:
        """The home of guests: hands out a ``d_c0`` cookie when the browser has none."""
        shapes = Shapes(self.data, request.base_url)
        featured: dict[str, Any] = {
            "questions": {q.id: shapes.question(q) for q in self.data.questions.values()},
        }
        response = html_response(render_page("发现", featured))
        if "d_c0" not in request.cookies:
            d_c0 = f"A{secrets.token_urlsafe(33)}|{int(time.time())}"
            response.set_cookie("d_c0", d_c0, D_C0_MAX_AGE)
        return response
