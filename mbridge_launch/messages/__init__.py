"""Message catalog split by area; each module defines MESSAGES = {key: (en, zh)}."""
