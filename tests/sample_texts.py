"""Six short sentences of different topics (bank twice, in two senses): the research tests' small corpus."""

TEXTS = [
    "The bank raised its interest rates.",
    "We sat on the river bank and fished.",
    "A storm closed two roads overnight.",
    "She baked fresh bread this morning.",
    "The striker scored twice in the final.",
    "Snow fell all night on the mountain pass.",
]
