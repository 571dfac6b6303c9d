"""SQL on the lab's own tables (db/compute_schema.py): plain dicts in and out.
Every write is one short transaction (`db.engine.transaction`)."""
