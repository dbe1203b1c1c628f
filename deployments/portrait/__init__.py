"""Generated portraits (AI 写真 / 形象照): styles as data, the conditions drawn from our own analysis, the person's face
kept; the Renderer (``deployments/render``) draws."""
