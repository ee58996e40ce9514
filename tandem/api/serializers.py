"""Request and response shapes of the REST API. The chat-completions request follows
OpenAI's; these serializers validate it and document it in the OpenAPI schema."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from .vocabulary import served_vocab_size

ROLES = ("system", "developer", "user", "assistant", "tool")
FUNCTION_NAME = r"^[a-zA-Z0-9_-]{1,64}$"  # OpenAI's rule for a function's name
# Seeds the engine accepts (inference.engine.sampling.SamplingParams checks the same
# range: a torch generator refuses anything outside it).
SEED_MIN, SEED_MAX = -(2**63), 2**63 - 1
VISITOR_ID_MAX = 128  # chat.Conversation.visitor_id
TOP_K_MAX = 1000
N_MAX = 8  # choices per request: each is a reply of its own, sharing the prompt's KV
TOP_LOGPROBS_MAX = 20  # OpenAI's bound (inference.engine.sampling has the same)
LOGIT_BIAS_MAX = 300  # OpenAI's own cap on the entries of logit_bias


# At least one character that is neither whitespace nor a control character: what the
# pipeline's validation accepts (see tandem.chat.validation.clean_user_text).
TEXT_PATTERN = "[^\\s\\u0000-\\u001f\\u007f-\\u009f]"


@extend_schema_field({"oneOf": [
    {"type": "string", "pattern": TEXT_PATTERN, "maxLength": 16000},
    {"type": "array", "minItems": 1, "items": {
        "type": "object", "required": ["type", "text"],
        "properties": {"type": {"type": "string", "enum": ["text"]},
                       "text": {"type": "string", "pattern": TEXT_PATTERN}}}},
]})
class ContentField(serializers.Field):
    """OpenAI message content: a string, or a list of {"type": "text", "text": …} parts."""

    def to_internal_value(self, data):
        if isinstance(data, str):
            return data
        if isinstance(data, list) and all(
            isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str) for p in data
        ):
            return "".join(p["text"] for p in data)
        raise serializers.ValidationError("content must be a string or a list of text parts.")

    def to_representation(self, value):
        return value


class FunctionCallSerializer(serializers.Serializer):
    name = serializers.RegexField(FUNCTION_NAME, max_length=64)
    arguments = serializers.CharField(allow_blank=True, trim_whitespace=False)


class ToolCallSerializer(serializers.Serializer):
    id = serializers.CharField(max_length=200)
    type = serializers.ChoiceField(choices=("function",))
    function = FunctionCallSerializer()


class ChatMessageSerializer(serializers.Serializer):
    role = serializers.ChoiceField(choices=ROLES)
    # Null or absent only for an assistant message that made tool calls, as OpenAI allows.
    content = ContentField(required=False, allow_null=True)
    name = serializers.CharField(required=False, max_length=64)
    tool_calls = ToolCallSerializer(many=True, required=False, allow_null=True)
    tool_call_id = serializers.CharField(required=False, max_length=200)

    def validate(self, attrs):
        role = attrs["role"]
        if attrs.get("tool_calls") and role != "assistant":
            raise serializers.ValidationError({"tool_calls": "Only an assistant message has tool_calls."})
        if role == "tool" and not attrs.get("tool_call_id"):
            raise serializers.ValidationError({"tool_call_id": "A tool message answers a call: tool_call_id."})
        if attrs.get("content") is None and not (role == "assistant" and attrs.get("tool_calls")):
            raise serializers.ValidationError({"content": "This field is required (it may be null only beside "
                                                          "tool_calls)."})
        return attrs


class FunctionSerializer(serializers.Serializer):
    name = serializers.RegexField(FUNCTION_NAME, max_length=64)
    description = serializers.CharField(required=False, allow_blank=True)
    parameters = serializers.DictField(required=False)
    strict = serializers.BooleanField(required=False, allow_null=True)  # enforced either way


class ToolSerializer(serializers.Serializer):
    type = serializers.ChoiceField(choices=("function",))
    function = FunctionSerializer()


@extend_schema_field({"oneOf": [{"type": "string", "enum": ["none", "auto", "required"]}, {
    "type": "object", "required": ["type", "function"],
    "properties": {"type": {"type": "string", "enum": ["function"]},
                   "function": {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}}}}]})
class ToolChoiceField(serializers.Field):
    def to_internal_value(self, data):
        if data in ("none", "auto", "required"):
            return data
        if (isinstance(data, dict) and data.get("type") == "function" and isinstance(data.get("function"), dict)
                and isinstance(data["function"].get("name"), str) and set(data) == {"type", "function"}):
            return {"type": "function", "function": {"name": data["function"]["name"]}}
        raise serializers.ValidationError(
            "tool_choice must be 'none', 'auto', 'required' or {\"type\": \"function\", \"function\": {\"name\": …}}.")

    def to_representation(self, value):
        return value


class StreamOptionsSerializer(serializers.Serializer):
    include_usage = serializers.BooleanField(required=False, default=False)


@extend_schema_field({"oneOf": [{"type": "string"}, {"type": "array", "maxItems": 4, "items": {"type": "string"}}],
                      "nullable": True})
class StopField(serializers.Field):
    def to_internal_value(self, data):
        if data is None:
            return []
        if isinstance(data, str):
            data = [data]
        if not isinstance(data, list) or not all(isinstance(s, str) for s in data) or len(data) > 4:
            raise serializers.ValidationError("stop must be a string or a list of at most 4 strings.")
        return [s for s in data if s]

    def to_representation(self, value):
        return value


@extend_schema_field({"type": "object", "nullable": True, "maxProperties": LOGIT_BIAS_MAX,
                      "additionalProperties": {"type": "number", "minimum": -100, "maximum": 100}})
class LogitBiasField(serializers.Field):
    """OpenAI's logit_bias: {"<token id>": bias in -100..100}; to [[id, bias], …]."""

    def to_internal_value(self, data):
        if data is None:
            return []
        if not isinstance(data, dict) or len(data) > LOGIT_BIAS_MAX:
            raise serializers.ValidationError(
                f"logit_bias must be an object of at most {LOGIT_BIAS_MAX} token ids to biases.")
        vocab = served_vocab_size()
        out = []
        for key, bias in data.items():
            if not (isinstance(key, str) and key.isdigit() and int(key) < vocab):
                raise serializers.ValidationError(f"'{key}' is not a token id of this model (0..{vocab - 1}).")
            if isinstance(bias, bool) or not isinstance(bias, int | float) or not -100 <= bias <= 100:
                raise serializers.ValidationError(f"The bias of token {key} must be a number in -100..100.")
            out.append([int(key), float(bias)])
        return out

    def to_representation(self, value):
        return value


class JsonSchemaFormatSerializer(serializers.Serializer):
    name = serializers.RegexField(r"^[a-zA-Z0-9_-]{1,64}$", max_length=64)
    description = serializers.CharField(required=False, allow_blank=True)
    schema = serializers.DictField(required=False)
    strict = serializers.BooleanField(required=False, allow_null=True)

    def to_internal_value(self, data):
        if isinstance(data, dict):
            for key in data:
                if key not in self.fields:
                    raise serializers.ValidationError({key: "Unrecognized field."})
        return super().to_internal_value(data)


class ResponseFormatSerializer(serializers.Serializer):
    """OpenAI's response_format: text, json_object, or json_schema (always enforced, by
    grammar-constrained decoding, whether or not `strict` is set)."""

    type = serializers.ChoiceField(choices=("text", "json_object", "json_schema"))
    json_schema = JsonSchemaFormatSerializer(required=False)

    def validate(self, attrs):
        if attrs["type"] == "json_schema" and "json_schema" not in attrs:
            raise serializers.ValidationError({"json_schema": "Required when type is 'json_schema'."})
        return attrs


class ChatCompletionRequestSerializer(serializers.Serializer):
    model = serializers.CharField(max_length=200)
    messages = ChatMessageSerializer(many=True, allow_empty=False)
    max_tokens = serializers.IntegerField(required=False, allow_null=True, min_value=1)
    max_completion_tokens = serializers.IntegerField(required=False, allow_null=True, min_value=1)
    temperature = serializers.FloatField(required=False, allow_null=True, min_value=0, max_value=2)
    top_p = serializers.FloatField(required=False, allow_null=True, min_value=0, max_value=1)
    seed = serializers.IntegerField(required=False, allow_null=True, min_value=SEED_MIN, max_value=SEED_MAX)
    stop = StopField(required=False, allow_null=True)
    stream = serializers.BooleanField(required=False, default=False)
    stream_options = StreamOptionsSerializer(required=False, allow_null=True)
    # Stored as the conversation's visitor id: the column's length, or PostgreSQL refuses it.
    user = serializers.CharField(required=False, allow_blank=True, max_length=VISITOR_ID_MAX)
    safety_identifier = serializers.CharField(required=False, allow_blank=True, max_length=VISITOR_ID_MAX)
    n = serializers.IntegerField(required=False, allow_null=True, min_value=1, max_value=N_MAX)
    logprobs = serializers.BooleanField(required=False, allow_null=True)
    top_logprobs = serializers.IntegerField(required=False, allow_null=True, min_value=0,
                                            max_value=TOP_LOGPROBS_MAX)
    # vLLM's extension: keep the k most likely tokens (0 or absent: off).
    top_k = serializers.IntegerField(required=False, allow_null=True, min_value=0, max_value=TOP_K_MAX)
    frequency_penalty = serializers.FloatField(required=False, allow_null=True, min_value=-2, max_value=2)
    presence_penalty = serializers.FloatField(required=False, allow_null=True, min_value=-2, max_value=2)
    # vLLM's extension: > 1 discourages tokens already in the prompt or the reply.
    repetition_penalty = serializers.FloatField(required=False, allow_null=True, min_value=0.01,
                                                max_value=10)
    logit_bias = LogitBiasField(required=False, allow_null=True)
    response_format = ResponseFormatSerializer(required=False, allow_null=True)
    tools = ToolSerializer(many=True, required=False, allow_null=True, max_length=128)
    tool_choice = ToolChoiceField(required=False, allow_null=True)
    parallel_tool_calls = serializers.BooleanField(required=False, allow_null=True)

    def validate_top_p(self, value):
        if value is not None and value <= 0:
            raise serializers.ValidationError("top_p must be greater than 0.")
        return value

    def validate_messages(self, value):
        if value[-1]["role"] not in ("user", "tool"):
            raise serializers.ValidationError("The last message must have role 'user' (or 'tool').")
        return value

    def validate(self, attrs):
        tools, choice = attrs.get("tools") or [], attrs.get("tool_choice")
        names = [t["function"]["name"] for t in tools]
        if len(set(names)) != len(names):
            raise serializers.ValidationError({"tools": "Function names must be unique."})
        if choice not in (None, "none") and not tools:
            raise serializers.ValidationError({"tool_choice": "tool_choice needs tools."})
        if isinstance(choice, dict) and choice["function"]["name"] not in names:
            raise serializers.ValidationError({"tool_choice": f"No tool is named '{choice['function']['name']}'."})
        if attrs.get("top_logprobs") is not None and not attrs.get("logprobs"):
            raise serializers.ValidationError({"top_logprobs": "top_logprobs needs logprobs: true."})
        if tools and choice != "none" and (attrs.get("response_format") or {}).get("type", "text") != "text":
            raise serializers.ValidationError(
                {"response_format": "A response_format beside tools is not supported; the tools' grammar applies."})
        return attrs


class UsageSerializer(serializers.Serializer):
    prompt_tokens = serializers.IntegerField()
    completion_tokens = serializers.IntegerField()
    total_tokens = serializers.IntegerField()
    prompt_tokens_details = serializers.DictField(required=False)


class ChoiceMessageSerializer(serializers.Serializer):
    role = serializers.CharField()
    content = serializers.CharField(allow_blank=True, allow_null=True, help_text="null when the reply is a tool call")
    tool_calls = ToolCallSerializer(many=True, required=False)


class TopLogprobSerializer(serializers.Serializer):
    token = serializers.CharField(allow_blank=True)
    logprob = serializers.FloatField(help_text="-9999.0 for a token the grammar forbids")
    bytes = serializers.ListField(child=serializers.IntegerField(min_value=0, max_value=255))


class TokenLogprobSerializer(TopLogprobSerializer):
    top_logprobs = TopLogprobSerializer(many=True)


class ChoiceLogprobsSerializer(serializers.Serializer):
    content = TokenLogprobSerializer(many=True)
    refusal = serializers.JSONField(allow_null=True)


class ChoiceSerializer(serializers.Serializer):
    index = serializers.IntegerField()
    message = ChoiceMessageSerializer()
    finish_reason = serializers.CharField()
    logprobs = ChoiceLogprobsSerializer(allow_null=True, help_text="with `logprobs: true`; else null")


class SourceSerializer(serializers.Serializer):
    """A help-centre article a reply was grounded in (docs/knowledge.md)."""

    article_id = serializers.UUIDField(allow_null=True, help_text="null once the article was deleted")
    title = serializers.CharField()
    url = serializers.CharField(allow_blank=True)
    section = serializers.CharField(allow_blank=True, required=False,
                                    help_text="where in the article: its passage's heading path (a PDF's `Page 3`)")
    score = serializers.FloatField(help_text="0..1, higher is better; on the retrieval backend's own scale")


class ChatCompletionSerializer(serializers.Serializer):
    id = serializers.CharField()
    object = serializers.CharField()
    created = serializers.IntegerField()
    model = serializers.CharField()
    choices = ChoiceSerializer(many=True)
    usage = UsageSerializer()
    sources = SourceSerializer(many=True, help_text="the articles the reply was grounded in, best first")


class ErrorBodySerializer(serializers.Serializer):
    message = serializers.CharField()
    type = serializers.CharField()
    param = serializers.CharField(allow_null=True)
    code = serializers.CharField(allow_null=True)


class ErrorSerializer(serializers.Serializer):
    error = ErrorBodySerializer()


class ModelSerializer(serializers.Serializer):
    id = serializers.CharField()
    object = serializers.CharField()
    created = serializers.IntegerField()
    owned_by = serializers.CharField()


class ModelListSerializer(serializers.Serializer):
    object = serializers.CharField()
    data = ModelSerializer(many=True)


class ConversationCreateSerializer(serializers.Serializer):
    visitor_id = serializers.CharField(required=False, allow_blank=True, max_length=128, default="")


class ActionCallStateSerializer(serializers.Serializer):
    call = serializers.UUIDField()
    name = serializers.CharField()
    status = serializers.ChoiceField(choices=["awaiting_approval", "queued", "running", "succeeded", "failed",
                                              "refused", "denied"])
    status_line = serializers.CharField(allow_blank=True, help_text="what a widget visitor would have read")


class StrictBooleanField(serializers.BooleanField):
    """JSON true or false only: DRF's BooleanField also takes "no", 0 or "off", and a
    typo'd value must be a 400, not a guess."""

    def to_internal_value(self, data):
        if not isinstance(data, bool):
            self.fail("invalid", input=data)
        return data


class MessageSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    role = serializers.CharField()
    content = serializers.CharField(allow_blank=True)
    status = serializers.CharField()
    prompt_tokens = serializers.IntegerField()
    completion_tokens = serializers.IntegerField()
    finish_reason = serializers.CharField(allow_blank=True)
    created_at = serializers.DateTimeField()
    sources = SourceSerializer(many=True, required=False,
                               help_text="an assistant reply's sources, best first ([] for other messages)")
    # A tenant action's call and its result (tandem.actions.transcript), as agents see them.
    tool_calls = ToolCallSerializer(many=True, required=False,
                                    help_text="on a reply that called one of the tenant's actions: the call")
    action = ActionCallStateSerializer(required=False, help_text="on a reply that called an action: how it went")
    tool_call_id = serializers.CharField(required=False, help_text="on a `tool` message: the call it answers")
    name = serializers.CharField(required=False, help_text="on a `tool` message: the action's name")


class ConversationSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    channel = serializers.CharField()
    visitor_id = serializers.CharField(allow_blank=True)
    status = serializers.CharField()
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()


class PostMessageSerializer(serializers.Serializer):
    content = ContentField()
    stream = serializers.BooleanField(required=False, default=False)
    max_tokens = serializers.IntegerField(required=False, allow_null=True, min_value=1)
    temperature = serializers.FloatField(required=False, allow_null=True, min_value=0, max_value=2)
    seed = serializers.IntegerField(required=False, allow_null=True, min_value=SEED_MIN, max_value=SEED_MAX)
    top_p = serializers.FloatField(required=False, allow_null=True, min_value=0, max_value=1)
    # As OpenAI's (repetition_penalty as vLLM's); absent: the tenant's repetition control
    # (tandem.repetition; on by default), which stops loops.
    frequency_penalty = serializers.FloatField(required=False, allow_null=True, min_value=-2, max_value=2)
    presence_penalty = serializers.FloatField(required=False, allow_null=True, min_value=-2, max_value=2)
    repetition_penalty = serializers.FloatField(required=False, allow_null=True, min_value=0.01, max_value=10)
    actions = StrictBooleanField(
        required=False, default=True,
        help_text="offer the tenant's actions to this reply (true, the default); false: answer without them")

    def validate_top_p(self, value):
        if value is not None and value <= 0:
            raise serializers.ValidationError("top_p must be greater than 0.")
        return value


class UsageDaySerializer(serializers.Serializer):
    date = serializers.DateField()
    requests = serializers.IntegerField()
    prompt_tokens = serializers.IntegerField()
    completion_tokens = serializers.IntegerField()
    total_tokens = serializers.IntegerField()
    ttft_ms_p50 = serializers.FloatField(allow_null=True)
    ttft_ms_p99 = serializers.FloatField(allow_null=True)
    duration_ms_p50 = serializers.FloatField(allow_null=True)
    duration_ms_p99 = serializers.FloatField(allow_null=True)


class ConversationListSerializer(serializers.Serializer):
    object = serializers.CharField()
    data = ConversationSerializer(many=True)
    has_more = serializers.BooleanField()


class MessageListSerializer(serializers.Serializer):
    object = serializers.CharField()
    data = MessageSerializer(many=True)


class UsageListSerializer(serializers.Serializer):
    object = serializers.CharField()
    data = UsageDaySerializer(many=True)
    refused_today = serializers.DictField(
        child=serializers.IntegerField(), required=False,
        help_text="Requests admission refused today (UTC), by reason, e.g. visitor_requests_per_minute.")


class ListQuerySerializer(serializers.Serializer):
    limit = serializers.IntegerField(required=False, min_value=1, max_value=100, default=20)


class UsageQuerySerializer(serializers.Serializer):
    # `from` is a Python keyword, so the field is declared by name below.
    to = serializers.DateField(required=False, help_text="last day (UTC), default today")


UsageQuerySerializer._declared_fields["from"] = serializers.DateField(
    required=False, help_text="first day (UTC), default 30 days ago")
