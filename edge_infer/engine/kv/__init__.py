"""The KV cells: the pool the slots share (pool.py, slots.py) and the prompt cache's two
tiers under it (tiers.py: RAM in ram_tier.py, disk in disk_tier.py with kv_file.py's format)."""
