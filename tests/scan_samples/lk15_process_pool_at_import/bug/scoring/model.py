def score(features: list[float]) -> float:
    return sum(f * f for f in features)
