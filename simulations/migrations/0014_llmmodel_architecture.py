"""LLM models carry their mixture-of-experts, multi-head latent attention and sliding-window
blocks in one JSON column; existing (dense) rows get an empty one."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("simulations", "0013_device_idle_w_help"),
    ]

    operations = [
        migrations.AddField(
            model_name="llmmodel",
            name="architecture",
            field=models.JSONField(
                blank=True,
                default=dict,
                help_text="Mixture-of-experts (moe), multi-head latent attention (mla) and "
                "sliding-window blocks of the model (core ModelSpec.architecture()); empty for a "
                "dense model.",
            ),
        ),
    ]
