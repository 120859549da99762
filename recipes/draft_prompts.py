"""Training prompts for the SmolLM2 draft: generated chat instructions and stdlib code prefixes.

Chat instructions are composed from templates and topic lists with a seeded generator, so they are
reproducible and never the benchmark's hand-written prompts (``benchmarks.text.prompts``; a
test checks the two are disjoint). Code prefixes are cut from the train split of the stdlib corpus
(the held-out modules, which the code benchmark draws from, are excluded).
"""

from __future__ import annotations

import random

from benchmarks.text.corpus import corpus_files, read_sources

TOPICS = (
    "recursion",
    "binary search",
    "hash tables",
    "linked lists",
    "sorting algorithms",
    "unit tests",
    "version control",
    "regular expressions",
    "HTTP requests",
    "JSON files",
    "CSV parsing",
    "virtual environments",
    "list comprehensions",
    "decorators",
    "generators",
    "context managers",
    "exceptions",
    "logging",
    "type hints",
    "dataclasses",
    "async code",
    "threads",
    "databases",
    "SQL joins",
    "caching",
    "compression",
    "encryption",
    "passwords",
    "backups",
    "spreadsheets",
    "photosynthesis",
    "the water cycle",
    "gravity",
    "volcanoes",
    "earthquakes",
    "black holes",
    "the moon's phases",
    "tides",
    "rainbows",
    "vaccines",
    "the immune system",
    "sleep",
    "exercise",
    "healthy breakfasts",
    "budgeting",
    "saving money",
    "interest rates",
    "inflation",
    "taxes",
    "job interviews",
    "public speaking",
    "time management",
    "learning a language",
    "reading habits",
    "gardening",
    "composting",
    "houseplants",
    "bread baking",
    "coffee",
    "tea",
    "soup",
    "pasta",
    "camping",
    "hiking",
    "cycling",
    "running shoes",
    "chess openings",
    "guitar chords",
    "painting",
    "photography",
    "birdwatching",
    "recycling",
    "solar panels",
    "electric cars",
    "wind power",
    "climate",
    "forests",
    "oceans",
    "deserts",
    "mountains",
    "rivers",
    "ancient Rome",
    "the printing press",
    "the internet",
    "smartphones",
    "email etiquette",
    "teamwork",
    "friendship",
    "moving house",
    "pets",
    "dogs",
    "cats",
    "bees",
    "whales",
    "dinosaurs",
    "planets",
    "stars",
    "maps",
    "trains",
)
THINGS = (
    "a rainy morning",
    "an old lighthouse",
    "a lost key",
    "the first snow",
    "a city at night",
    "a cup of tea",
    "a long train ride",
    "autumn leaves",
    "a quiet library",
    "the sea",
    "a robot",
    "a garden",
    "a mountain lake",
    "a birthday",
    "a small cafe",
    "the last day of school",
    "a storm",
)
TASKS = (
    "read a text file line by line",
    "reverse a string",
    "count words in a sentence",
    "remove duplicates from a list",
    "merge two dictionaries",
    "sort a list of tuples by the second item",
    "check if a number is prime",
    "compute a factorial",
    "find the largest element in a list",
    "flatten a nested list",
    "parse a date string",
    "download a web page",
    "write a CSV file",
    "read JSON from a file",
    "generate a random password",
    "measure how long a function takes",
    "compute the average of a list",
    "find common elements of two lists",
    "validate an email address",
    "convert Celsius to Fahrenheit",
    "split a list into chunks",
    "count the vowels in a string",
    "check whether a string is a palindrome",
    "compute Fibonacci numbers",
    "transpose a matrix",
    "rename files in a folder",
    "find the most common item in a list",
    "capitalize every word",
)
DISHES = (
    "lentil soup",
    "tomato sauce",
    "banana bread",
    "fried rice",
    "guacamole",
    "porridge",
    "vegetable curry",
    "omelette",
    "hummus",
    "flatbread",
    "apple crumble",
    "potato salad",
)
CHAT_TEMPLATES = (
    "Explain {topic} in simple terms.",
    "What are three tips about {topic}?",
    "Give me a short introduction to {topic}.",
    "Why does {topic} matter?",
    "What is a common mistake people make with {topic}?",
    "Summarize the main ideas of {topic} in a few sentences.",
    "How would you explain {topic} to a ten-year-old?",
    "List the pros and cons of {topic}.",
    "Write a short poem about {thing}.",
    "Write a two-sentence story about {thing}.",
    "Describe {thing} in a few vivid sentences.",
    "Write a haiku about {thing}.",
    "How do I {task} in Python?",
    "Write a Python function to {task}.",
    "Show me how to {task} with a short example.",
    "What is the simplest way to {task}?",
    "Write a Python function that can {task}, with a docstring.",
    "Give me a simple recipe for {dish}.",
    "What do I need to make {dish}, and how long does it take?",
    "Write a short letter to a friend about {thing}.",
    "Write a four-line poem about {topic}.",
    "Give me a short summary of the history of {topic}.",
)


def chat_prompts(n: int, seed: int = 0) -> list[str]:
    """n distinct instructions composed from the templates (seeded)."""
    rng = random.Random(seed)
    out: list[str] = []
    seen: set[str] = set()
    while len(out) < n:
        template = rng.choice(CHAT_TEMPLATES)
        text = template.format(
            topic=rng.choice(TOPICS), thing=rng.choice(THINGS), task=rng.choice(TASKS), dish=rng.choice(DISHES)
        )
        if text not in seen:
            seen.add(text)
            out.append(text)
        if len(seen) >= _combinations():
            break
    return out


def _combinations() -> int:
    per = {"topic": len(TOPICS), "thing": len(THINGS), "task": len(TASKS), "dish": len(DISHES)}
    return sum(next(v for k, v in per.items() if "{" + k + "}" in t) for t in CHAT_TEMPLATES)


def code_prefixes(n: int, seed: int = 0, min_lines: int = 6, max_lines: int = 30) -> list[str]:
    """n code prefixes from the train split: a run of lines ending just after a ``def``/``class``
    line or a blank line inside a function body, so the continuation is ordinary code."""
    rng = random.Random(seed)
    sources = read_sources(corpus_files("train"))
    files = [s for s in sources if s.count("\n") > max_lines * 2]
    out = []
    while len(out) < n:
        lines = rng.choice(files).splitlines()
        starts = [i for i, line in enumerate(lines) if line.lstrip().startswith(("def ", "class "))]
        if not starts:
            continue
        end = rng.choice(starts) + 1 + rng.randrange(0, 4)  # the signature and a few body lines
        begin = max(0, end - rng.randint(min_lines, max_lines))
        text = "\n".join(lines[begin:end]) + "\n"
        if len(text.strip()) > 40:
            out.append(text)
    return out
