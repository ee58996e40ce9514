from django.apps import AppConfig


class ContactsConfig(AppConfig):
    name = "tandem.contacts"
    label = "contacts"
    default_auto_field = "django.db.models.BigAutoField"
