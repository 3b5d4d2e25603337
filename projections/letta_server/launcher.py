# A program, not a module of this package: `up` copies it to <home>/letta_launcher.py (that path in
# the command line is how up/down/status recognise this home's server) and runs it with the Letta
# venv's interpreter. It imports `letta` (only that venv has it, and only inside functions), so
# nothing in this project imports it, and it imports nothing from this project.
# mypy: disable-error-code="import-not-found"
"""Run `letta server` with one fix and the embedding endpoint's key.

Letta 0.16.7 builds a new AsyncOpenAI client for every embedding request and never closes it.
When the garbage collector frees one, its deferred close unregisters a file-descriptor number that
a new asyncpg connection may own by then, and that connection hangs for 60 s (HTTP 500 on batch
inserts of ~16+ passages). Reusing one client per configuration (and event loop) avoids it.

The key: Letta sends ``os.environ["OPENAI_API_KEY"]`` (else "DUMMY_API_KEY") as the bearer key of
an openai-type embedding endpoint. Set in the environment from the start, it would also turn on
Letta's OpenAI provider (``model_settings.openai_api_key``, read once when ``letta.settings`` is
imported), which calls api.openai.com. So it arrives as ``ARI_LETTA_EMBED_KEY`` and becomes
``OPENAI_API_KEY`` only after those settings are read.
"""

import argparse
import asyncio
import os
import sys


def _patch_openai_client():
    from letta.llm_api import openai_client

    original = openai_client.AsyncOpenAI
    if getattr(original, "_ari_ledger_cached", False):
        return
    cache = {}

    def cached_async_openai(*args, **kwargs):
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        try:
            key = (
                id(loop),
                kwargs.get("api_key"),
                str(kwargs.get("base_url")),
                repr(args),
                repr(sorted((k, v) for k, v in kwargs.items() if k not in ("api_key", "base_url"))),
            )
        except Exception:  # unrepresentable arguments: do not cache
            return original(*args, **kwargs)
        hit = cache.get(key)
        if hit is not None and hit[0] is loop and not hit[1].is_closed():
            return hit[1]
        client = original(*args, **kwargs)
        cache[key] = (loop, client)
        return client

    cached_async_openai._ari_ledger_cached = True
    cached_async_openai.__wrapped__ = original
    openai_client.AsyncOpenAI = cached_async_openai
    print(
        "ari-ledger launcher: letta.llm_api.openai_client.AsyncOpenAI now reuses one client per configuration",
        flush=True,
    )


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8283)
    args = parser.parse_args()
    sys.argv = [sys.argv[0]]  # letta reads a few flags from sys.argv; pass none
    embed_key = os.environ.pop("ARI_LETTA_EMBED_KEY", "")
    _patch_openai_client()  # imports letta.settings: its model_settings are read without a key
    if embed_key:
        from letta.settings import model_settings

        if model_settings.openai_api_key:
            sys.exit("ari-ledger launcher: OPENAI_API_KEY reached Letta's settings; refusing to start")
        os.environ["OPENAI_API_KEY"] = embed_key
    # What `letta server --host H --port P` does (letta/cli/cli.py: server -> start_server).
    from letta.server.rest_api.app import start_server

    try:
        start_server(port=args.port, host=args.host, debug=False, reload=False)
    except KeyboardInterrupt:
        sys.exit(0)


if __name__ == "__main__":
    main()
