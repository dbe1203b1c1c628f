"""idphoto job."""
