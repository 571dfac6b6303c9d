"""Nova's side of the books: what a flavor claims, how many more of a shape fit,
and the one syntax a shape is typed in."""
