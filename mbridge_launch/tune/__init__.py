"""`mbridge-launch tune PLAN`: measure the layouts the planner cannot tell apart, keep the fastest."""
