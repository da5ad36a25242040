"""MT cache, translation memories, provenance per segment and counts per origin

Revision ID: 0008
Revises: 0007
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | Sequence[str] | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

COUNTS = {
    "jobs": ("segments_from_memory", "segments_from_cache", "segments_from_mt"),
    "chunks": ("from_memory", "from_cache", "from_mt"),
}


def upgrade() -> None:
    """Add the cache and memory tables, the jobs' options and the origin columns."""
    op.create_table(
        "mt_cache",
        sa.Column("scope", sa.String(36), primary_key=True),
        sa.Column("fingerprint", sa.String(16), primary_key=True),
        sa.Column("key", sa.String(64), primary_key=True),
        sa.Column("target", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_mt_cache_created", "mt_cache", ["created_at"])
    op.create_table(
        "memories",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column(
            "tenant_id",
            sa.String(36),
            sa.ForeignKey("tenants.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("name", sa.String(255)),
        sa.Column("source_lang", sa.String(16), nullable=False),
        sa.Column("target_lang", sa.String(16), nullable=False),
        sa.Column("entries", sa.Integer(), nullable=False),
        sa.Column("chars", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_memories_tenant_created", "memories", ["tenant_id", "created_at"])
    op.create_table(
        "memory_entries",
        sa.Column(
            "memory_id",
            sa.String(36),
            sa.ForeignKey("memories.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("key", sa.String(64), primary_key=True),
        sa.Column("source", sa.Text(), nullable=False),
        sa.Column("target", sa.Text(), nullable=False),
    )
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("use_cache", sa.Boolean()))
        batch.add_column(sa.Column("memories", sa.JSON()))
        for name in COUNTS["jobs"]:
            batch.add_column(sa.Column(name, sa.Integer(), nullable=False, server_default="0"))
    with op.batch_alter_table("chunks") as batch:
        for name in COUNTS["chunks"]:
            batch.add_column(sa.Column(name, sa.Integer(), nullable=False, server_default="0"))
    with op.batch_alter_table("segments") as batch:
        batch.add_column(sa.Column("origin", sa.String(8)))
        batch.add_column(sa.Column("fingerprint", sa.String(16)))


def downgrade() -> None:
    with op.batch_alter_table("segments") as batch:
        batch.drop_column("fingerprint")
        batch.drop_column("origin")
    with op.batch_alter_table("chunks") as batch:
        for name in COUNTS["chunks"]:
            batch.drop_column(name)
    with op.batch_alter_table("jobs") as batch:
        for name in COUNTS["jobs"]:
            batch.drop_column(name)
        batch.drop_column("memories")
        batch.drop_column("use_cache")
    op.drop_table("memory_entries")
    op.drop_index("ix_memories_tenant_created", table_name="memories")
    op.drop_table("memories")
    op.drop_index("ix_mt_cache_created", table_name="mt_cache")
    op.drop_table("mt_cache")
