"""The comment chains of :class:`crawler.spiders.zhihu.ZhihuSpider`: root comment pages, their
embedded child previews, and the child pages each root declares beyond them. See docs/zhihu.md.
"""

from __future__ import annotations

from collections.abc import Iterator

from scrapy.http import Response

from crawler.spiders.zhihu_chains import (
    CONTENT,
    COUNT,
    CURSOR,
    OWNER,
    SKIP,
    Output,
    ZhihuChains,
)
from crawler.zhihu.completeness import Tally
from crawler.zhihu.parsers import Context, comment_item, excused_comments
from crawler.zhihu.payloads import JSON, ParseError, list_page


class ZhihuComments(ZhihuChains):
    def _comments(
        self, response: Response, endpoint: str, body: JSON, ctx: Context
    ) -> Iterator[Output]:
        content_type, content_id = response.meta[CONTENT]
        page = list_page(body, response.url)
        tally = Tally.of(response.meta)
        if endpoint == "root_comment":  # children declare their total at the root
            tally = tally.declare(page.totals, excused_comments(body))
        repeated = set(response.meta.get(SKIP) or ())
        count, limit = int(response.meta.get(COUNT, 0)), self.config.max_comments
        for obj in page.data:
            if limit and count >= limit:
                break
            if str(obj.get("id")) in repeated:
                continue
            previews = (obj.get("child_comments") or []) if endpoint == "root_comment" else []
            made = []
            for comment in (obj, *previews):
                try:
                    item = comment_item(comment, content_type, content_id, ctx)
                except ParseError as exc:
                    yield self._entry_unparsed(response, endpoint, comment, exc, ctx)
                    continue
                self._stat("items/comment")
                made.append(item.comment_id)
                count += 1
                yield item
                yield from self._creator(item.author["url_token"], ctx.source)
            if not made or made[0] != str(obj.get("id")):
                continue  # the comment itself was unusable: its children are out of reach
            tally = tally.add(1)
            if endpoint == "root_comment":
                yield from self._children(
                    response, obj, made[1:], limited=bool(limit) and count >= limit
                )
        limited = bool(limit) and count >= limit
        yield from self._go_on(
            response, endpoint, page, tally, limited=limited, count=count, **{SKIP: []}
        )

    def _children(
        self, response: Response, root: JSON, previews: list[str], *, limited: bool
    ) -> Iterator[Output]:
        """The rest of a root's children: from its next offset, or from the first child page
        (skipping the previews it repeats) when the root declares more than it embeds."""
        root_id = str(root["id"])
        declared = root.get("child_comment_count")
        tally = Tally(declared if isinstance(declared, int) else None, 0, len(previews))
        cursor = str(root.get("child_comment_next_offset") or "")
        if limited or not (tally.wants_more() or (tally.declared is None and cursor)):
            if not limited:
                yield from self._recorded("child_comment", root_id, tally, response.meta)
            return
        url = self.config.endpoints.url(
            "child_comment", root_id=root_id, cursor=cursor, limit=self.config.comment_page_size
        )
        meta = {
            COUNT: len(previews),
            CURSOR: cursor,
            OWNER: root_id,
            SKIP: [] if cursor else previews,
            **tally.meta(),
        }
        yield self._follow(response, url, "child_comment", **meta)
