# A program, not a module of this package: `up` copies it to <home>/create_schema.py and runs it
# with the Letta venv's interpreter. It imports `letta` (only that venv has it, and only inside
# main()), so nothing in this project imports it, and it imports nothing from this project.
# mypy: disable-error-code="import-not-found"
"""Create Letta's tables from its ORM, idempotently (letta's wheel ships no migrations).

Needs ``LETTA_PG_URI`` in the environment, set before letta is imported. Prints ``{"tables": N}``.
"""

import asyncio
import json
import os


async def main() -> None:
    uri = os.environ["LETTA_PG_URI"]  # set before letta is imported
    # Importing letta.orm registers every model on Base.metadata.
    from letta.database_utils import get_database_uri_for_context
    from letta.orm import Base
    from sqlalchemy import text
    from sqlalchemy.ext.asyncio import create_async_engine

    engine = create_async_engine(get_database_uri_for_context(uri, "async"))
    try:
        async with engine.begin() as conn:  # one transaction: all or nothing
            await conn.execute(text("CREATE EXTENSION IF NOT EXISTS vector"))
            await conn.run_sync(Base.metadata.create_all)
            # The one object only letta's (unshipped) migrations make; without it no agent can be made.
            await conn.execute(text("CREATE SEQUENCE IF NOT EXISTS message_seq_id START 1"))
            await conn.execute(
                text("ALTER TABLE messages ALTER COLUMN sequence_id SET DEFAULT nextval('message_seq_id'::regclass)")
            )
            n = (
                await conn.execute(text("SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'"))
            ).scalar()
    finally:
        await engine.dispose()
    print(json.dumps({"tables": n}))


if __name__ == "__main__":
    asyncio.run(main())
