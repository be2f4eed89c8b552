"""Scheduled jobs: ``jobs`` reads and validates ``jobs.yaml`` (commands, cron schedules, profiles, dependencies),
``scheduler`` runs the due jobs at their cron times, each in its own ``python -m pipelines.cli`` process.

May import ``pipelines.lakehouse``, ``pipelines.config`` and ``jbod_model``; a job reaches the other rooms only
through that process boundary, never by importing them.
"""

from __future__ import annotations
