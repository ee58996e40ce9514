from django.apps import AppConfig


class OnboardingConfig(AppConfig):
    name = "tandem.onboarding"
    label = "onboarding"
    default_auto_field = "django.db.models.BigAutoField"
