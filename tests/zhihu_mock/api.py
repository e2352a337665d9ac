"""API v4 endpoints: JSON objects, offset lists, comment_v5 cursor lists and search_v3."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from typing import Any

from tests.zhihu_mock.login import Sessions, account_json
from tests.zhihu_mock.messages import Request, Response, error_response, json_response, not_found
from tests.zhihu_mock.objects import Shapes
from tests.zhihu_mock.paging import (
    comment_cursor,
    cursor_start,
    int_param,
    offset_paging,
    page_url,
)
from tests.zhihu_mock.records import Comment, ContentType, MockData
from tests.zhihu_mock.search import SearchShapes
from tests.zhihu_mock.variety import Variety

MAX_LIMIT = 20
COMMENT_KINDS: dict[str, ContentType] = {
    "answers": "answer",
    "articles": "article",
    "zvideos": "zvideo",
}
# comment order -> (sort key of the list, number written into cursors)
_ORDERS: dict[str, tuple[Callable[[Comment], tuple[int, str]], Callable[[Comment], int]]] = {
    "score": (lambda c: (-c.score, c.id), lambda c: c.score),
    "ts": (lambda c: (-c.created_time, c.id), lambda c: c.created_time),
    "sort": (lambda c: (c.created_time, c.id), lambda c: c.created_time),
}
_SORTER = [{"type": "score", "text": "默认"}, {"type": "ts", "text": "最新"}]


class Api:
    """One method per endpoint; ids come from the route's groups."""

    def __init__(self, data: MockData, sessions: Sessions, variety: Variety) -> None:
        self.data = data
        self.sessions = sessions
        self.variety = variety

    def _shapes(self, request: Request) -> Shapes:
        return Shapes(self.data, request.base_url, self.variety)

    def _page(
        self,
        request: Request,
        ids: Sequence[str],
        render: Callable[[int, str], Any],
        default_limit: int,
        list_name: str,
    ) -> Response:
        """An offset page of ``ids`` as served (``Variety.withheld``); ``paging.totals`` counts
        them all; only the page's objects are rendered (``render(i, id)``)."""
        offset = int_param(request, "offset", 0, 10**9)
        limit = max(1, int_param(request, "limit", default_limit, MAX_LIMIT))
        served = self.variety.served(list_name, ids)
        page = [render(offset + i, item) for i, item in enumerate(served[offset : offset + limit])]
        return json_response(
            {"paging": offset_paging(request, offset, limit, len(ids)), "data": page}
        )

    def question(self, request: Request, qid: str) -> Response:
        question = self.data.questions.get(qid)
        if question is None:
            return not_found()
        return json_response(self._shapes(request).question(question))

    def _sorted_answers(self, request: Request, qid: str, sort_param: str) -> list[str]:
        ids = list(self.data.questions[qid].answer_ids)
        order = request.query.get(sort_param, "default")
        if order == "created":
            ids.sort(key=lambda a: -self.data.answers[a].created_time)
        elif order == "updated":
            ids.sort(key=lambda a: -self.data.answers[a].updated_time)
        return ids

    def question_answers(self, request: Request, qid: str) -> Response:
        if qid not in self.data.questions:
            return not_found()
        shapes = self._shapes(request)
        ids = self._sorted_answers(request, qid, "sort_by")
        return self._page(
            request,
            ids,
            lambda _, aid: shapes.answer(self.data.answers[aid]),
            5,
            "question_answers",
        )

    def question_feeds(self, request: Request, qid: str) -> Response:
        if qid not in self.data.questions:
            return not_found()
        shapes = self._shapes(request)

        def card(position: int, aid: str) -> dict[str, Any]:
            return {
                "type": "question_feed_card",
                "target_type": "answer",
                "target": shapes.answer(self.data.answers[aid]),
                "cursor": hashlib.md5(f"{qid}:{position}".encode()).hexdigest()[:20],
                "position": position,
                "skip_count": 0,
                "is_jump_native": False,
            }

        ids = self._sorted_answers(request, qid, "order")
        return self._page(request, ids, card, 5, "question_feeds")

    def answer(self, request: Request, aid: str) -> Response:
        answer = self.data.answers.get(aid)
        if answer is None:
            return not_found()
        return json_response(self._shapes(request).answer(answer))

    def article(self, request: Request, article_id: str) -> Response:
        article = self.data.articles.get(article_id)
        if article is None:
            return not_found()
        return json_response(self._shapes(request).article(article))

    def zvideo(self, request: Request, zvideo_id: str) -> Response:
        zvideo = self.data.zvideos.get(zvideo_id)
        if zvideo is None:
            return not_found()
        return json_response(self._shapes(request).zvideo(zvideo))

    def member(self, request: Request, url_token: str) -> Response:
        person = self.data.people.get(url_token)
        if person is None:
            return not_found()
        return json_response(self._shapes(request).member(person))

    def member_answers(self, request: Request, url_token: str) -> Response:
        if url_token not in self.data.people:
            return not_found()
        shapes = self._shapes(request)
        ids = self.data.authored_by("answer", url_token)
        render = lambda _, aid: shapes.answer(self.data.answers[aid])  # noqa: E731
        return self._page(request, ids, render, 20, "member_answers")

    def member_articles(self, request: Request, url_token: str) -> Response:
        if url_token not in self.data.people:
            return not_found()
        shapes = self._shapes(request)
        ids = self.data.authored_by("article", url_token)
        return self._page(
            request, ids, lambda _, i: shapes.article(self.data.articles[i]), 20, "member_articles"
        )

    def member_zvideos(self, request: Request, url_token: str) -> Response:
        if url_token not in self.data.people:
            return not_found()
        shapes = self._shapes(request)
        ids = self.data.authored_by("zvideo", url_token)
        return self._page(
            request, ids, lambda _, i: shapes.zvideo(self.data.zvideos[i]), 20, "member_zvideos"
        )

    def _comment_page(
        self,
        request: Request,
        comments: list[Comment],
        default_order: str,
        list_name: str,
        hidden: Comment | None = None,
    ) -> dict[str, Any]:
        """``paging`` and ``data`` of one cursor page of ``comments`` as served (without
        ``hidden`` and what ``Variety.withheld`` keeps back); ``paging.totals`` counts them all."""
        order = request.query.get("order", default_order)
        sort_key, cursor_key = _ORDERS.get(order, _ORDERS[default_order])
        ordered = sorted(comments, key=sort_key)
        served = self.variety.served(list_name, [c for c in ordered if c is not hidden])
        start = cursor_start(request.query.get("offset", ""), served)
        limit = max(1, int_param(request, "limit", 10, MAX_LIMIT))
        page = served[start : start + limit]
        back = max(0, start - limit)

        def at(index: int) -> str:  # the cursor that starts a page at ``index``
            return (
                ""
                if index == 0
                else comment_cursor(served[index - 1], cursor_key(served[index - 1]))
            )

        shapes = self._shapes(request)
        return {
            "paging": {
                "is_end": start + limit >= len(served),
                "is_start": start == 0,
                "next": page_url(request, offset=at(start + len(page)), limit=limit, order=order),
                "previous": page_url(request, offset=at(back), limit=limit, order=order),
                "totals": len(ordered),
            },
            "data": [shapes.comment(c) for c in page],
        }

    def _counts(self, total: int, collapsed: int = 0) -> dict[str, Any]:
        return {
            "counts": {"total_counts": total, "collapsed_counts": collapsed, "reviewing_counts": 0},
            "comment_status": {"type": 0, "text": ""},
            "edit_status": {"type": 0, "text": ""},
        }

    def root_comments(self, request: Request, kind: str, content_id: str) -> Response:
        content_type = COMMENT_KINDS[kind]
        comments = self.data.comments_of(content_type, content_id)
        if not comments:  # unknown content, or content without comments
            return not_found()
        roots = [c for c in comments if c.is_root]
        hidden = self.variety.collapsed(roots)
        body = self._comment_page(request, roots, "score", "root_comment", hidden)
        counts = self._counts(len(comments), 0 if hidden is None else 1)
        return json_response(body | counts | {"sorter": _SORTER, "header": []})

    def child_comments(self, request: Request, root_id: str) -> Response:
        root = self.data.comments.get(root_id)
        if root is None or not root.is_root:
            return not_found()
        children = self.data.children_of(root_id)
        body = self._comment_page(request, children, "sort", "child_comment")
        root_shape = self._shapes(request).comment(root)
        return json_response(body | self._counts(len(children)) | {"root": root_shape})

    def search(self, request: Request) -> Response:
        keyword = request.query.get("q", "")
        if not keyword.strip():
            return error_response(400, 400, "搜索关键词不能为空")
        entries = self.variety.search_entries(self.data.search.get(keyword, ()))
        offset = int_param(request, "offset", 0, 10**9)
        limit = max(1, int_param(request, "limit", 20, MAX_LIMIT))
        page = entries[offset : offset + limit]
        is_end = offset + limit >= len(entries)
        hash_id = hashlib.md5(f"search:{keyword}".encode()).hexdigest()
        following = offset + len(page)
        results = SearchShapes(self._shapes(request), self.variety.search_forms(entries))
        next_url = page_url(
            request, offset=following, limit=limit, lc_idx=following, search_hash_id=hash_id
        )
        return json_response(
            {
                "paging": {"is_end": is_end, "next": "" if is_end else next_url},
                "data": [results.item(entry, keyword, offset + i) for i, entry in enumerate(page)],
                "hit_labels": None,
                "related_search_result": [],
                "search_action_info": {
                    "attached_info_bytes": "",
                    "lc_idx": following,
                    "search_hash_id": hash_id,
                    "isfeed": False,
                },
                "is_brand_word": False,
                "pendant": None,
                "sensitive_level": 0,
                "warning": None,
                "filter_items": [],
                "ab_params": {},
                "item_in_view": {},
                "domain_info": None,
                "is_koc_words": False,
                "strategy_res_list": None,
            }
        )

    def me(self, request: Request) -> Response:
        username = self.sessions.account(request.cookies.get("z_c0"))
        if username is None:
            return error_response(401, 100, "请先登录", "AuthenticationInvalidRequest")
        return json_response(account_json(username, request.base_url))


def served_roots(
    data: MockData, variety: Variety, kind: str, content_id: str
) -> tuple[list[Comment], list[Comment]]:
    """The roots of a content not collapsed, in root order ``score``, and those served."""
    roots = data.roots_of(kind, content_id)
    hidden = variety.collapsed(roots)
    ordered = sorted((r for r in roots if r is not hidden), key=_ORDERS["score"][0])
    return ordered, variety.served("root_comment", ordered)


def served_comments(data: MockData, variety: Variety, kind: str, content_id: str) -> list[Comment]:
    """The comments of a content the site serves with root order ``score`` (roots, then the
    children of each served root)."""
    _, served = served_roots(data, variety, kind, content_id)
    children = [c for r in served for c in variety.served("child_comment", data.children_of(r.id))]
    return served + children
