"""Message catalog data: en.yaml and zh.yaml (see mbridge_launch/base/i18n.py). No Python code lives here."""
