from __future__ import annotations

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse
from django.urls import URLPattern, URLResolver, include, path, register_converter
from django.views.decorators.csrf import csrf_exempt
from django.views.i18n import set_language

from foundry_site import views
from foundry_site.api import api
from foundry_site.openai_api import views as openai_views


def _api_urls() -> tuple[list[URLPattern | URLResolver], str, str]:
    """The API's URLs, exempt from LoginRequiredMiddleware: the API authenticates itself and answers 401."""
    patterns, app_name, namespace = api.urls
    for pattern in patterns:
        if isinstance(pattern, URLPattern):
            login_not_required(pattern.callback)
    return patterns, app_name, namespace


@csrf_exempt
@login_not_required
def mcp_endpoint(request: HttpRequest) -> HttpResponse:
    """``foundry_site.mcp.http.mcp_endpoint``, imported on the first request: the MCP SDK takes a second to import,
    which every management command's URL check would pay (``foundry serve`` preloads it: foundry_site/wsgi.py)."""
    from foundry_site.mcp.http import mcp_endpoint as endpoint

    return endpoint(request)


class _Anything:
    """A path converter taking every character, a newline too (``<path:…>`` stops at one): any other path under
    /v1/ gets OpenAI's JSON 404, never the HTML page."""

    regex = r"[\s\S]*"

    def to_python(self, value: str) -> str:
        return value

    def to_url(self, value: str) -> str:
        return value


register_converter(_Anything, "anything")


urlpatterns = [
    path("", views.home, name="home"),
    path("favicon.ico", views.favicon),
    path("accounts/login/", auth_views.LoginView.as_view(redirect_authenticated_user=True), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    # The language selector posts here; open before signing in too, so the login page can be read in it.
    path("i18n/setlang/", login_not_required(set_language), name="set_language"),
    path("sources/", include("sources.urls")),
    path("", include("generation.urls")),
    path("", include("generation.querylog.urls")),
    path("", include("specs.urls")),
    path("admin/", admin.site.urls),
    path("api/v1/", _api_urls()),
    path("mcp", mcp_endpoint, name="mcp"),  # MCP Streamable HTTP (bearer token), foundry_site/mcp/http.py
    # OpenAI-compatible chat API (bearer token), foundry_site/openai_api/
    path("v1/models", openai_views.models, name="openai-models"),
    path("v1/models/<path:model>", openai_views.model_detail, name="openai-model"),
    path("v1/chat/completions", openai_views.chat_completions, name="openai-chat"),
    path("v1/<anything:path>", openai_views.unknown, name="openai-unknown"),
]

handler500 = "foundry_site.views.server_error"
