"""JSON shapes of API v4 objects, with the extra fields and nulls real payloads carry."""

from __future__ import annotations

import re
from typing import Any

from tests.zhihu_mock.paging import comment_cursor
from tests.zhihu_mock.records import (
    ANONYMOUS,
    Answer,
    Article,
    Comment,
    MockData,
    Person,
    Question,
    Zvideo,
)
from tests.zhihu_mock.text import excerpt_of
from tests.zhihu_mock.variety import Variety

CHILD_PREVIEW = 2  # child comments embedded in a root comment
ANONYMOUS_AVATAR = "https://picx.zhimg.com/v2-d41c2ceaed8f51999522f903672a521f_l.jpg"
JSON = dict[str, Any]


def derived(object_id: str, modulo: int) -> int:
    """A stable small number derived from an id, for counters the data does not model."""
    return int(object_id[-6:], 16 if not object_id.isdigit() else 10) % modulo


def camel_case(value: Any) -> Any:
    """The keys of ``js-initialData`` entities: ``voteup_count`` -> ``voteupCount``."""
    if isinstance(value, dict):
        return {_camel(str(k)): camel_case(v) for k, v in value.items()}
    if isinstance(value, list):
        return [camel_case(item) for item in value]
    return value


def _camel(key: str) -> str:
    return re.sub(r"_([a-z0-9])", lambda m: m.group(1).upper(), key)


class Shapes:
    """Renders records of one :class:`MockData` as JSON objects with URLs on ``base_url``."""

    def __init__(self, data: MockData, base_url: str, variety: Variety | None = None) -> None:
        self.data = data
        self.base = base_url
        self.variety = variety or Variety()

    def _count(self, object_id: str, value: int) -> int | None:
        """A number, or null where ``Variety.field_drift`` drifted the object."""
        return None if self.variety.drifted(object_id) else value

    def author(self, url_token: str) -> JSON:
        if url_token == ANONYMOUS:
            return {
                "id": "0",
                "url_token": "",
                "name": "匿名用户",
                "headline": "",
                "gender": -1,
                "avatar_url": ANONYMOUS_AVATAR,
                "avatar_url_template": "https://picx.zhimg.com/v2-d41c2ceaed8f51999522f903672a521f.jpg",
                "type": "people",
                "url": f"{self.base}/api/v4/people/0",
                "user_type": "people",
                "is_org": False,
                "is_advertiser": False,
                "is_privacy": True,
                "is_anonymous": True,
                "badge": [],
                "badge_v2": None,
            }
        person = self.data.people[url_token]
        return {
            "id": person.id,
            "url_token": person.url_token,
            "name": person.name,
            "headline": person.headline,
            "gender": person.gender,
            "avatar_url": person.avatar_url,
            "avatar_url_template": person.avatar_url.replace("_l.jpg", "_{size}.jpg"),
            "type": "people",
            "url": f"{self.base}/api/v4/people/{person.id}",
            "user_type": "organization" if person.is_org else "people",
            "is_org": person.is_org,
            "is_advertiser": False,
            "is_privacy": False,
            "is_anonymous": False,
            "follower_count": person.follower_count,
            "is_following": False,
            "is_followed": False,
            "badge": [],
            "badge_v2": self._badge(person),
        }

    @staticmethod
    def _badge(person: Person) -> JSON | None:
        if not (person.is_org or person.follower_count > 1000):
            return None
        title = "机构认证" if person.is_org else "优秀答主"
        badge = {"type": "identity" if person.is_org else "best_answerer", "description": title}
        return {
            "title": title,
            "icon": "https://picx.zhimg.com/v2-badge_l.png",
            "night_icon": "https://picx.zhimg.com/v2-badge-night_l.png",
            "merged_badges": [badge],
            "detail_badges": [badge],
        }

    def member(self, person: Person) -> JSON:
        token = person.url_token
        return {
            **self.author(token),
            "follower_count": self._count(person.id, person.follower_count),
            "following_count": person.following_count,
            "answer_count": len(self.data.authored_by("answer", token)),
            "articles_count": len(self.data.authored_by("article", token)),
            "question_count": len(self.data.authored_by("question", token)),
            "zvideo_count": len(self.data.authored_by("zvideo", token)),
            "columns_count": derived(person.id, 4),
            "voteup_count": person.voteup_count,
            "thanked_count": derived(person.id, 500),
            "favorited_count": derived(person.id, 900),
            "ip_info": f"IP 属地{person.ip_location}",
            "description": "",
            "locations": [],
            "employments": [],
            "educations": [],
            "business": None,
            "cover_url": "",
            "mutual_followees_count": 0,
        }

    def question(self, question: Question, detail: bool = True) -> JSON:
        brief: JSON = {
            "id": question.id,
            "type": "question",
            "question_type": "normal",
            "title": question.title,
            "created": question.created,
            "updated_time": question.updated_time,
            "url": f"{self.base}/api/v4/questions/{question.id}",
            "relationship": {},
        }
        if not detail:
            return brief
        return {
            **brief,
            "detail": question.detail,
            "excerpt": excerpt_of(question.detail),
            "answer_count": len(question.answer_ids),
            "follower_count": question.follower_count,
            "visit_count": question.visit_count,
            "comment_count": 0,
            "author": self.author(question.author),
            "topics": [
                {
                    "id": topic.id,
                    "name": topic.name,
                    "type": "topic",
                    "url": f"{self.base}/api/v4/topics/{topic.id}",
                    "avatar_url": "https://picx.zhimg.com/v2-topic_l.jpg",
                    "topic_type": "normal",
                }
                for topic in question.topics
            ],
            "is_anonymous": False,
            "bound_topic_ids": [int(t.id) for t in question.topics],
        }

    def _reaction(self, object_id: str, voteup: int, comments: int) -> JSON:
        return {
            "statistics": {
                "up_vote_count": voteup,
                "down_vote_count": derived(object_id, 7),
                "like_count": derived(object_id, 40),
                "comment_count": comments,
                "favorites": derived(object_id, 300),
                "share_count": derived(object_id, 60),
                "pin_count": 0,
                "plaudit_count": 0,
            },
            "relation": {"vote": "Neutral", "liked": False, "faved": False, "is_author": False},
        }

    def answer(self, answer: Answer) -> JSON:
        question = self.data.questions[answer.question_id]
        comments = len(self.data.comments_of("answer", answer.id))
        index = self.data.answer_index(answer.id)
        ids = question.answer_ids
        return {
            "id": answer.id,
            "type": "answer",
            "answer_type": "normal",
            "url": f"{self.base}/api/v4/answers/{answer.id}",
            "author": self.author(answer.author),
            "question": self.question(question, detail=False)
            | {"author": self.author(question.author)},
            "created_time": answer.created_time,
            "updated_time": answer.updated_time,
            "voteup_count": self._count(answer.id, answer.voteup_count),
            "comment_count": comments,
            "thanks_count": answer.thanks_count,
            "ip_info": answer.ip_info,
            "is_collapsed": answer.is_collapsed,
            "collapsed_by": "nobody",
            "is_copyable": True,
            "is_labeled": False,
            "excerpt": excerpt_of(answer.content),
            "content": answer.content,
            "editable_content": "",
            "thumbnail": "",
            "attachment": None,
            "extras": "",
            "mark_infos": [],
            "reshipment_settings": "allowed",
            "comment_permission": "all",
            "can_comment": {"status": True, "reason": ""},
            "suggest_edit": {"status": False, "reason": "", "title": "", "url": "", "tip": ""},
            "reaction": self._reaction(answer.id, answer.voteup_count, comments),
            "relationship": {"is_author": False, "is_authorized": False, "voting": 0},
            "pagination_info": {
                "index": index,
                "next_answer_ids": list(ids[index + 1 : index + 6]),
                "prev_answer_ids": list(ids[max(0, index - 5) : index]),
            },
        }

    def article(self, article: Article) -> JSON:
        comments = len(self.data.comments_of("article", article.id))
        return {
            "id": article.id,
            "type": "article",
            "article_type": "normal",
            "title": article.title,
            "excerpt": excerpt_of(article.content),
            "content": article.content,
            "created": article.created,
            "updated": article.updated,
            "voteup_count": self._count(article.id, article.voteup_count),
            "comment_count": comments,
            "author": self.author(article.author),
            "url": f"{self.base}/p/{article.id}",
            "image_url": article.image_url,
            "title_image": article.image_url,
            "ip_info": article.ip_info,
            "column": None,
            "voting": 0,
            "can_comment": {"status": True, "reason": ""},
            "comment_permission": "all",
            "has_publishing_draft": False,
            "is_labeled": False,
            "reaction": self._reaction(article.id, article.voteup_count, comments),
        }

    def zvideo(self, zvideo: Zvideo) -> JSON:
        return {
            "id": zvideo.id,
            "type": "zvideo",
            "title": zvideo.title,
            "description": zvideo.description,
            "created_at": zvideo.created_at,
            "published_at": zvideo.created_at,
            "updated_at": zvideo.updated_at,
            "duration": zvideo.duration,
            "play_count": zvideo.play_count,
            "voteup_count": self._count(zvideo.id, zvideo.voteup_count),
            "comment_count": len(self.data.comments_of("zvideo", zvideo.id)),
            "author": self.author(zvideo.author),
            "image_url": zvideo.image_url,
            "url": f"{self.base}/zvideo/{zvideo.id}",
            "state": "published",
            "video": {
                "video_id": zvideo.id[-10:],
                "duration": zvideo.duration,
                "width": 1280,
                "height": 720,
                "thumbnail": zvideo.image_url,
                "playlist": None,
            },
        }

    def comment_author(self, url_token: str) -> JSON:
        person = self.data.people[url_token]
        medal = person.follower_count > 500
        return {
            key: self.author(url_token)[key]
            for key in ("id", "url_token", "name", "headline", "gender", "avatar_url", "type")
        } | {
            "url": f"{self.base}/api/v4/people/{person.id}",
            "user_type": "people",
            "is_org": person.is_org,
            "is_anonymous": False,
            "vip_info": {"is_vip": False, "vip_icon": None},
            "exposed_medal": {
                "medal_id": "1" if medal else "",
                "medal_name": "知势榜" if medal else "",
                "avatar_url": "",
                "description": "",
            },
            "badge_v2": self._badge(person),
        }

    def comment(self, comment: Comment) -> JSON:
        """A comment_v5 item; a root carries a preview of its children and their next cursor."""
        children = self.data.children_of(comment.id) if comment.is_root else []
        preview = children[:CHILD_PREVIEW] if self.variety.child_previews else []
        has_more = len(children) > CHILD_PREVIEW
        content_author = self.data.content_author(comment.content_type, comment.content_id)
        shape: JSON = {
            "id": comment.id,
            "type": "comment",
            "resource_type": comment.content_type,
            "member_id": int(self.data.people[comment.author].id[:8], 16),
            "url": f"{self.base}/api/v4/comment_v5/comment/{comment.id}",
            "hot": False,
            "top": False,
            "content": comment.content,
            "score": comment.score,
            "comment_type": comment.content_type,
            "created_time": comment.created_time,
            "is_delete": False,
            "collapsed": False,
            "reviewing": False,
            "reply_comment_id": comment.reply_id,
            "reply_root_comment_id": comment.root_id,
            "liked": False,
            "like_count": comment.like_count,
            "disliked": False,
            "dislike_count": comment.dislike_count,
            "is_author": comment.author == content_author,
            "can_like": True,
            "can_dislike": True,
            "can_delete": False,
            "can_reply": True,
            "can_hot": False,
            "can_author_top": False,
            "is_author_top": False,
            "can_collapse": False,
            "can_share": True,
            "can_unfold": False,
            "can_truncate": False,
            "can_more": True,
            "author": self.comment_author(comment.author),
            "author_tag": [],
            "reply_author_tag": [],
            "content_tag": [],
            "comment_tag": [
                {
                    "type": "ip_info",
                    "text": comment.ip_info,
                    "color": "#8590A6",
                    "night_color": "#5C6370",
                    "has_border": False,
                }
            ],
            "child_comment_count": len(children),
            "child_comment_next_offset": (
                comment_cursor(preview[-1], preview[-1].created_time)
                if has_more and preview
                else None
            ),
            "child_comments": [self.comment(child) for child in preview],
            "is_visible_only_to_myself": False,
        }
        if self.variety.drifted(comment.id):
            del shape["like_count"]
        if not comment.is_root:
            shape["reply_to_author"] = self.comment_author(comment.reply_to_author)
        return shape
