"""Sign in and out and password change: Django's auth views with the console's
templates. Failed sign-ins are throttled (tandem/console/throttle.py); the admin's own
sign-in page sends people here, so it is throttled the same way."""

from __future__ import annotations

from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth import views as auth_views
from django.shortcuts import redirect
from django.urls import reverse, reverse_lazy

from tandem.handoff.views import home_url

from .. import throttle


class SignInView(auth_views.LoginView):
    template_name = "registration/login.html"
    redirect_authenticated_user = True

    def _who(self):
        return {"username": self.request.POST.get("username", "")[:150],
                "address": throttle.client_address(self.request)}

    def post(self, request, *args, **kwargs):
        wait = throttle.retry_after_s(**self._who())
        if wait:
            # Refused before the password is checked: an unbound form (binding it would
            # authenticate), and a message that says how long to wait.
            form = self.form_class(request=request, initial={"username": self._who()["username"]})
            minutes = max(1, round(wait / 60))
            context = self.get_context_data(
                form=form, throttled=f"Too many failed sign-in attempts. Try again in {minutes} "
                                     f"minute{'s' if minutes != 1 else ''}.")
            response = self.render_to_response(context, status=429)
            response["Retry-After"] = str(wait)
            return response
        return super().post(request, *args, **kwargs)

    def form_invalid(self, form):
        throttle.count_failure(**self._who())
        return super().form_invalid(form)

    def form_valid(self, form):
        throttle.clear(**self._who())
        return super().form_valid(form)

    def get_default_redirect_url(self):
        # Without a ?next=: agents (every role with the inbox) start where their work is.
        return home_url(self.request.user) or super().get_default_redirect_url()


class SignOutView(auth_views.LogoutView):
    pass


class PasswordChangeView(auth_views.PasswordChangeView):
    template_name = "registration/console_password_change.html"
    success_url = reverse_lazy("console:password_change_done")

    def get_form(self, form_class=None):
        form = super().get_form(form_class)
        form.label_suffix = ""
        return form

    def form_valid(self, form):
        messages.success(self.request, "Your password was changed.")
        return super().form_valid(form)


class PasswordChangeDoneView(auth_views.PasswordChangeDoneView):
    template_name = "registration/console_password_change_done.html"


def admin_login(request):
    """/admin/login/: the console's (throttled) sign-in, then back to the admin. A
    signed-in person who is not staff goes to the console instead of round the loop."""
    if request.user.is_authenticated:
        if request.user.is_staff:
            return redirect("admin:index")
        messages.info(request, "The Django admin is for platform operators.")
        return redirect("console:overview")
    query = urlencode({"next": request.GET.get("next") or reverse("admin:index")})
    return redirect(f"{reverse('console:login')}?{query}")
