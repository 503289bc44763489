"""Who may administer the service."""


def is_admin(user):
    return user == "root"
