"""Face analysis: detection, landmarks, alignment to templates, paste-back."""
