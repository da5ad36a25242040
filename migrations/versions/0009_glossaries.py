"""Glossaries of the DeepL dialect and their entries

Revision ID: 0009
Revises: 0008
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | Sequence[str] | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Add the glossaries and glossary_entries tables."""
    op.create_table(
        "glossaries",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column(
            "tenant_id",
            sa.String(36),
            sa.ForeignKey("tenants.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("source_lang", sa.String(16), nullable=False),
        sa.Column("target_lang", sa.String(16), nullable=False),
        sa.Column("entry_count", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_glossaries_tenant_created", "glossaries", ["tenant_id", "created_at"])
    op.create_table(
        "glossary_entries",
        sa.Column(
            "glossary_id",
            sa.String(36),
            sa.ForeignKey("glossaries.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("source", sa.String(1024), primary_key=True),
        sa.Column("target", sa.String(1024), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("glossary_entries")
    op.drop_index("ix_glossaries_tenant_created", table_name="glossaries")
    op.drop_table("glossaries")
