"""Authority: grants, their attenuation on delegation, and the check before every tool body."""
