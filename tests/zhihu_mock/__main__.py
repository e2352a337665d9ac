"""``python -m tests.zhihu_mock --port 8080 --seed 1``: serve the mock until Ctrl-C."""

from __future__ import annotations

import argparse
import threading

from tests.zhihu_mock.config import DataConfig, MockConfig
from tests.zhihu_mock.server import ZhihuMock


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.zhihu_mock", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080, help="0 picks a free port")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--rate-limit", type=int, default=None, help="API requests per second")
    parser.add_argument("--session-lifetime", type=float, default=None, help="seconds")
    parser.add_argument("--no-signature", action="store_true", help="accept unsigned API calls")
    parser.add_argument("--no-login", action="store_true", help="no z_c0 needed")
    parser.add_argument(
        "--challenge",
        action="append",
        default=[],
        metavar="REGEX",
        help="API paths answering the __zse_ck challenge until solved (repeatable)",
    )
    parser.add_argument("--zse-ck-lifetime", type=float, default=None, help="seconds")
    args = parser.parse_args(argv)
    config = MockConfig(
        data=DataConfig(seed=args.seed),
        host=args.host,
        port=args.port,
        rate_limit=args.rate_limit,
        session_lifetime=args.session_lifetime,
        require_d_c0=not args.no_signature,
        require_signature=not args.no_signature,
        require_login=not args.no_login,
        challenge_paths=tuple(args.challenge),
        zse_ck_lifetime=args.zse_ck_lifetime,
    )
    with ZhihuMock(config) as mock:
        question = next(iter(mock.data.questions))
        print(f"Zhihu mock on {mock.base_url} (seed {args.seed})", flush=True)
        print(f"  try {mock.base_url}/question/{question}", flush=True)
        print(f"  accounts: {', '.join(config.accounts)}", flush=True)
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            print("stopped", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
