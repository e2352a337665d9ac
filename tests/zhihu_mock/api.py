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

    def __init__(self, data: MockData, sessions: Sessions) -> None:
        self.data = data
        self.sessions = sessions

    def _page(
        self,
        request: Request,
        ids: Sequence[str],
        render: Callable[[int, str], Any],
        default_limit: int,
    ) -> Response:
        """An offset page of ``ids``; only the page's objects are rendered (``render(i, id)``)."""
        offset = int_param(request, "offset", 0, 10**9)
        limit = max(1, int_param(request, "limit", default_limit, MAX_LIMIT))
        page = [render(offset + i, item) for i, item in enumerate(ids[offset : offset + limit])]
        return json_response(
            {"paging": offset_paging(request, offset, limit, len(ids)), "data": page}
        )

    def question(self, request: Request, qid: str) -> Response:
        question = self.data.questions.get(qid)
        if question is None:
            return not_found()
        return json_response(Shapes(self.data, request.base_url).question(question))

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
        shapes = Shapes(self.data, request.base_url)
        ids = self._sorted_answers(request, qid, "sort_by")
        return self._page(request, ids, lambda _, aid: shapes.answer(self.data.answers[aid]), 5)

    def question_feeds(self, request: Request, qid: str) -> Response:
        if qid not in self.data.questions:
            return not_found()
        shapes = Shapes(self.data, request.base_url)

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

        return self._page(request, self._sorted_answers(request, qid, "order"), card, 5)

    def answer(self, request: Request, aid: str) -> Response:
        answer = self.data.answers.get(aid)
        if answer is None:
            return not_found()
        return json_response(Shapes(self.data, request.base_url).answer(answer))

    def article(self, request: Request, article_id: str) -> Response:
        article = self.data.articles.get(article_id)
        if article is None:
            return not_found()
        return json_response(Shapes(self.data, request.base_url).article(article))

    def zvideo(self, request: Request, zvideo_id: str) -> Response:
        zvideo = self.data.zvideos.get(zvideo_id)
        if zvideo is None:
            return not_found()
        return json_response(Shapes(self.data, request.base_url).zvideo(zvideo))

    def member(self, request: Request, url_token: str) -> Response:
        person = self.data.people.get(url_token)
        if person is None:
            return not_found()
        return json_response(Shapes(self.data, request.base_url).member(person))

    def member_answers(self, request: Request, url_token: str) -> Response:
        if url_token not in self.data.people:
            return not_found()
        shapes = Shapes(self.data, request.base_url)
        ids = self.data.authored_by("answer", url_token)
        return self._page(request, ids, lambda _, aid: shapes.answer(self.data.answers[aid]), 20)

    def member_articles(self, request: Request, url_token: str) -> Response:
        if url_token not in self.data.people:
            return not_found()
        shapes = Shapes(self.data, request.base_url)
        ids = self.data.authored_by("article", url_token)
        return self._page(request, ids, lambda _, i: shapes.article(self.data.articles[i]), 20)

    def _comment_page(
        self, request: Request, comments: list[Comment], default_order: str
    ) -> dict[str, Any]:
        """``paging`` and ``data`` of one cursor page of ``comments``."""
        order = request.query.get("order", default_order)
        sort_key, cursor_key = _ORDERS.get(order, _ORDERS[default_order])
        ordered = sorted(comments, key=sort_key)
        start = cursor_start(request.query.get("offset", ""), ordered)
        limit = max(1, int_param(request, "limit", 10, MAX_LIMIT))
        page = ordered[start : start + limit]
        back = max(0, start - limit)

        def at(index: int) -> str:  # the cursor that starts a page at ``index``
            return (
                ""
                if index == 0
                else comment_cursor(ordered[index - 1], cursor_key(ordered[index - 1]))
            )

        shapes = Shapes(self.data, request.base_url)
        return {
            "paging": {
                "is_end": start + limit >= len(ordered),
                "is_start": start == 0,
                "next": page_url(request, offset=at(start + len(page)), limit=limit, order=order),
                "previous": page_url(request, offset=at(back), limit=limit, order=order),
                "totals": len(ordered),
            },
            "data": [shapes.comment(c) for c in page],
        }

    def _counts(self, total: int) -> dict[str, Any]:
        return {
            "counts": {"total_counts": total, "collapsed_counts": 0, "reviewing_counts": 0},
            "comment_status": {"type": 0, "text": ""},
            "edit_status": {"type": 0, "text": ""},
        }

    def root_comments(self, request: Request, kind: str, content_id: str) -> Response:
        content_type = COMMENT_KINDS[kind]
        comments = self.data.comments_of(content_type, content_id)
        if not comments:  # unknown content, or content without comments
            return not_found()
        roots = [c for c in comments if c.is_root]
        body = self._comment_page(request, roots, "score")
        return json_response(body | self._counts(len(comments)) | {"sorter": _SORTER, "header": []})

    def child_comments(self, request: Request, root_id: str) -> Response:
        root = self.data.comments.get(root_id)
        if root is None or not root.is_root:
            return not_found()
        children = self.data.children_of(root_id)
        body = self._comment_page(request, children, "sort")
        root_shape = Shapes(self.data, request.base_url).comment(root)
        return json_response(body | self._counts(len(children)) | {"root": root_shape})

    def search(self, request: Request) -> Response:
        keyword = request.query.get("q", "")
        if not keyword.strip():
            return error_response(400, 400, "搜索关键词不能为空")
        entries = self.data.search.get(keyword, ())
        offset = int_param(request, "offset", 0, 10**9)
        limit = max(1, int_param(request, "limit", 20, MAX_LIMIT))
        page = entries[offset : offset + limit]
        is_end = offset + limit >= len(entries)
        hash_id = hashlib.md5(f"search:{keyword}".encode()).hexdigest()
        following = offset + len(page)
        results = SearchShapes(Shapes(self.data, request.base_url))
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
