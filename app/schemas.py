"""Request and response bodies; the /translate API follows LibreTranslate's."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field


def _not_a_boolean(value: object) -> object:
    # pydantic's lax mode reads true/false as 1/0; for a count that is a client's mistake
    if isinstance(value, bool):
        raise ValueError("expected a whole number, not true/false")
    return value


Count = Annotated[int, BeforeValidator(_not_a_boolean)]  # numbers, and digit strings from forms


def _text_if_unset(value: object) -> object:
    # LibreTranslate reads a null or empty format (a form's unset field) as "text"
    return "text" if value is None or value == "" else value


Format = Annotated[str, BeforeValidator(_text_if_unset)]


def _zero_if_unset(value: object) -> object:
    # a null or empty count (a form's unset field, `"alternatives": null`) as none asked for
    return 0 if value is None or value == "" else value


#: the number of alternatives: 0 also when null or empty
Alternatives = Annotated[int, BeforeValidator(_not_a_boolean), BeforeValidator(_zero_if_unset)]


class TranslateRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")

    q: str | list[str] = Field(description="text to translate, or a list of texts")
    source: str = Field(description="source language code, or 'auto'")
    target: str = Field(description="target language code")
    format: Format = Field(
        "text",
        description="'text' (also when null or empty), or 'html': the markup is kept, only the "
        "text translated",
    )
    alternatives: Alternatives = Field(
        0, ge=0, description="number of extra translations to return (0 also when null or empty)"
    )
    beam_size: Count | None = Field(None, ge=1, description="beam size (extension)")
    max_length: Count | None = Field(
        None, ge=1, description="generated tokens per sentence at most (extension)"
    )
    api_key: str | None = Field(
        None, description="API key (checked when the server has a keys database)"
    )


class TranslateResponse(BaseModel):
    translatedText: str | list[str]  # noqa: N815 (LibreTranslate's field name)
    alternatives: list[str] | list[list[str]] | None = None
    detectedLanguage: dict | list[dict] | None = None  # noqa: N815
    model: str
    models: list[str] = Field(description="the models translated through, in turn")
    timings: dict[str, float]


class TranslateFileResponse(BaseModel):
    translatedFileUrl: str = Field(  # noqa: N815 (LibreTranslate's field name)
        description="where the translated file is downloaded from, while it is kept"
    )


class LanguageName(BaseModel):
    code: str
    name: str


class DefaultLanguages(BaseModel):
    source: LanguageName
    target: LanguageName


class FrontendSettings(BaseModel):
    """LibreTranslate's /frontend/settings (and this server's per-minute and per-day limits)."""

    charLimit: int  # noqa: N815 (LibreTranslate's field names)
    frontendTimeout: int  # noqa: N815
    apiKeys: bool  # noqa: N815
    keyRequired: bool  # noqa: N815
    suggestions: bool
    filesTranslation: bool  # noqa: N815
    supportedFilesFormat: list[str]  # noqa: N815
    language: DefaultLanguages
    reqLimitPerMinute: int  # noqa: N815
    charLimitPerDay: int  # noqa: N815
    batchLimit: int  # noqa: N815


class DetectRequest(BaseModel):
    q: str | list[str] = Field(description="text whose language to detect, or a list of texts")
    api_key: str | None = Field(None, description="API key (when the server has keys)")


class Detection(BaseModel):
    language: str
    confidence: float = Field(description="in percent")


class Language(BaseModel):
    code: str
    name: str
    targets: list[str]


class ErrorResponse(BaseModel):
    error: str


# what each error status means, for the OpenAPI schema's responses (`{"error": ...}` bodies)
ERRORS = {
    400: "Invalid request; the error names the field",
    403: "API key missing or not valid",
    404: "No such file: the link is wrong or the file expired",
    408: "The body did not arrive in time (MT_BODY_TIMEOUT_S, MT_FILE_BODY_TIMEOUT_S)",
    413: "Over a limit (characters, texts, body or file size, a key's limits); the error names it",
    415: "A compressed body (Content-Encoding): send it uncompressed",
    429: "Over the requests per minute or characters per day; Retry-After says when to retry",
    500: "A failure inside the server; the error has an id, also in the server's log",
    503: "Not taking it now (models loading, draining, the queue full, MT_MAX_CONCURRENCY "
    "requests in progress); Retry-After says when to retry",
    504: "The request's deadline passed (MT_REQUEST_TIMEOUT_S)",
}


def error_responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    """FastAPI's `responses` for these error statuses, each an ErrorResponse."""
    return {code: {"model": ErrorResponse, "description": ERRORS[code]} for code in codes}


LANGUAGE_NAMES = {
    "en": "English",
    "de": "German",
    "fr": "French",
    "es": "Spanish",
    "it": "Italian",
    "nl": "Dutch",
    "pt": "Portuguese",
    "ru": "Russian",
    "zh": "Chinese",
    "ja": "Japanese",
}
