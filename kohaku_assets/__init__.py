"""The Dagster layer over kohaku_rag: assets, resources, jobs, sensors, schedule, CLI."""
