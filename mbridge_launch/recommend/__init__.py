"""The recommender: from what the user asked for to a recipe, layout, command and Plan."""
