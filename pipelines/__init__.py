"""MySQL/MariaDB binlog -> Delta Lake CDC pipeline."""
