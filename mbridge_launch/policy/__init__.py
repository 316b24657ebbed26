"""Permission policy: site, user and project limits, strictest wins (files.py); a submission's
GPU-hours (cost.py)."""
