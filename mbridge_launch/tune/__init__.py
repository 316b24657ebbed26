"""`mbridge-launch tune PLAN`: measure the layouts the planner cannot tell apart, keep the fastest."""

# The defaults of a tune session, here (not in trials.py) so that building the command line
# imports nothing heavy: every command's parser is built at start.
DEFAULT_STEPS = 30
DEFAULT_MAX_LAYOUTS = 4
DEFAULT_TIME_LIMIT = "00:15:00"
