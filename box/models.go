package box

// Model ids of the Box API's model enums. The wire
// accepts any string: a Model can be any provider-prefixed id.

// Model is a model id, e.g. "anthropic/claude-sonnet-4-5".
type Model string

// Claude Code models (anthropic/).
const (
	ClaudeCodeFable5    Model = "anthropic/claude-fable-5"
	ClaudeCodeFable5_1  Model = "anthropic/claude-fable-5-1"
	ClaudeCodeOpus5     Model = "anthropic/claude-opus-5"
	ClaudeCodeOpus4_5   Model = "anthropic/claude-opus-4-5"
	ClaudeCodeOpus4_6   Model = "anthropic/claude-opus-4-6"
	ClaudeCodeOpus4_7   Model = "anthropic/claude-opus-4-7"
	ClaudeCodeOpus4_8   Model = "anthropic/claude-opus-4-8"
	ClaudeCodeSonnet4   Model = "anthropic/claude-sonnet-4"
	ClaudeCodeSonnet4_5 Model = "anthropic/claude-sonnet-4-5"
	ClaudeCodeSonnet4_6 Model = "anthropic/claude-sonnet-4-6"
	ClaudeCodeSonnet5   Model = "anthropic/claude-sonnet-5"
	ClaudeCodeHaiku4_5  Model = "anthropic/claude-haiku-4-5"

	// ClaudeCodeOpus5_5 is Claude Opus 5.5.
	ClaudeCodeOpus5_5 Model = "anthropic/claude-opus-5-5"
)

// OpenAI models for the Codex harness (openai/). OpenAICodexGPT5_6 is an alias of Sol.
const (
	OpenAICodexGPT6Astra        Model = "openai/gpt-6-astra"
	OpenAICodexGPT5_6           Model = "openai/gpt-5.6"
	OpenAICodexGPT5_6Sol        Model = "openai/gpt-5.6-sol"
	OpenAICodexGPT5_6Terra      Model = "openai/gpt-5.6-terra"
	OpenAICodexGPT5_6Luna       Model = "openai/gpt-5.6-luna"
	OpenAICodexGPT5_5           Model = "openai/gpt-5.5"
	OpenAICodexGPT5_4           Model = "openai/gpt-5.4"
	OpenAICodexGPT5_4Mini       Model = "openai/gpt-5.4-mini"
	OpenAICodexGPT5_3Codex      Model = "openai/gpt-5.3-codex"
	OpenAICodexGPT5_3CodexSpark Model = "openai/gpt-5.3-codex-spark"
	OpenAICodexGPT5_2Codex      Model = "openai/gpt-5.2-codex"
	OpenAICodexGPT5_1CodexMax   Model = "openai/gpt-5.1-codex-max"
	OpenAICodexGPT5_1CodexMini  Model = "openai/gpt-5.1-codex-mini"

	// OpenAICodexGPT6_1Sol is GPT-6.1 Sol.
	OpenAICodexGPT6_1Sol Model = "openai/gpt-6.1-sol"
	// OpenAICodexGPT6Sol is GPT-6 Sol.
	OpenAICodexGPT6Sol Model = "openai/gpt-6-sol"
	// OpenAICodexGPT6Luna is GPT-6 Luna.
	OpenAICodexGPT6Luna Model = "openai/gpt-6-luna"
)

// Models through OpenRouter (openrouter/).
const (
	OpenRouterClaudeFable5   Model = "openrouter/anthropic/claude-fable-5"
	OpenRouterClaudeOpus5    Model = "openrouter/anthropic/claude-opus-5"
	OpenRouterClaudeSonnet5  Model = "openrouter/anthropic/claude-sonnet-5"
	OpenRouterClaudeSonnet4  Model = "openrouter/anthropic/claude-sonnet-4"
	OpenRouterClaudeOpus4_5  Model = "openrouter/anthropic/claude-opus-4-5"
	OpenRouterClaudeHaiku4_5 Model = "openrouter/anthropic/claude-haiku-4-5"
	OpenRouterDeepSeekR1     Model = "openrouter/deepseek/deepseek-r1"
	OpenRouterGemini2_5Pro   Model = "openrouter/google/gemini-2.5-pro"
	OpenRouterGemini2_5Flash Model = "openrouter/google/gemini-2.5-flash"
	OpenRouterGPT5_6Sol      Model = "openrouter/openai/gpt-5.6-sol"
	OpenRouterGPT5_6Terra    Model = "openrouter/openai/gpt-5.6-terra"
	OpenRouterGPT5_6Luna     Model = "openrouter/openai/gpt-5.6-luna"
	OpenRouterGPT4_1         Model = "openrouter/openai/gpt-4.1"
	OpenRouterO3             Model = "openrouter/openai/o3"
	OpenRouterO4Mini         Model = "openrouter/openai/o4-mini"

	// OpenRouterClaudeFable5_1 is Claude Fable 5.1 through OpenRouter.
	OpenRouterClaudeFable5_1 Model = "openrouter/anthropic/claude-fable-5.1"
	// OpenRouterClaudeOpus5_5 is Claude Opus 5.5 through OpenRouter.
	OpenRouterClaudeOpus5_5 Model = "openrouter/anthropic/claude-opus-5.5"
	// OpenRouterGPT6_1Sol is GPT-6.1 Sol through OpenRouter.
	OpenRouterGPT6_1Sol Model = "openrouter/openai/gpt-6.1-sol"
	// OpenRouterGPT6Astra is GPT-6 Astra through OpenRouter.
	OpenRouterGPT6Astra Model = "openrouter/openai/gpt-6-astra"
	// OpenRouterGPT6Sol is GPT-6 Sol through OpenRouter.
	OpenRouterGPT6Sol Model = "openrouter/openai/gpt-6-sol"
	// OpenRouterGPT6Luna is GPT-6 Luna through OpenRouter.
	OpenRouterGPT6Luna Model = "openrouter/openai/gpt-6-luna"
)

// Models through the Vercel AI Gateway (vercel/); note the dotted Claude versions.
const (
	VercelClaudeFable5        Model = "vercel/anthropic/claude-fable-5"
	VercelClaudeOpus5         Model = "vercel/anthropic/claude-opus-5"
	VercelClaudeSonnet5       Model = "vercel/anthropic/claude-sonnet-5"
	VercelClaudeOpus4_7       Model = "vercel/anthropic/claude-opus-4.7"
	VercelClaudeSonnet4_6     Model = "vercel/anthropic/claude-sonnet-4.6"
	VercelClaudeOpus4_6       Model = "vercel/anthropic/claude-opus-4.6"
	VercelClaudeHaiku4_5      Model = "vercel/anthropic/claude-haiku-4.5"
	VercelGPT5_6Sol           Model = "vercel/openai/gpt-5.6-sol"
	VercelGPT5_6Terra         Model = "vercel/openai/gpt-5.6-terra"
	VercelGPT5_6Luna          Model = "vercel/openai/gpt-5.6-luna"
	VercelGPT5_5              Model = "vercel/openai/gpt-5.5"
	VercelGPT5_5Pro           Model = "vercel/openai/gpt-5.5-pro"
	VercelGPT5_4              Model = "vercel/openai/gpt-5.4"
	VercelGPT5_4Mini          Model = "vercel/openai/gpt-5.4-mini"
	VercelGemini3_5Flash      Model = "vercel/google/gemini-3.5-flash"
	VercelGemini3_1FlashLite  Model = "vercel/google/gemini-3.1-flash-lite"
	VercelGemini3_1ProPreview Model = "vercel/google/gemini-3.1-pro-preview"

	// VercelClaudeFable5_1 is Claude Fable 5.1 through the Vercel AI Gateway.
	VercelClaudeFable5_1 Model = "vercel/anthropic/claude-fable-5.1"
	// VercelClaudeOpus5_5 is Claude Opus 5.5 through the Vercel AI Gateway.
	VercelClaudeOpus5_5 Model = "vercel/anthropic/claude-opus-5.5"
	// VercelGPT6_1Sol is GPT-6.1 Sol through the Vercel AI Gateway.
	VercelGPT6_1Sol Model = "vercel/openai/gpt-6.1-sol"
	// VercelGPT6Astra is GPT-6 Astra through the Vercel AI Gateway.
	VercelGPT6Astra Model = "vercel/openai/gpt-6-astra"
	// VercelGPT6Sol is GPT-6 Sol through the Vercel AI Gateway.
	VercelGPT6Sol Model = "vercel/openai/gpt-6-sol"
	// VercelGPT6Luna is GPT-6 Luna through the Vercel AI Gateway.
	VercelGPT6Luna Model = "vercel/openai/gpt-6-luna"
	// VercelGemini3_8Flash is Gemini 3.8 Flash through the Vercel AI Gateway.
	VercelGemini3_8Flash Model = "vercel/google/gemini-3.8-flash"
)

// Grok models through the Vercel AI Gateway (vercel/spacexai/). The gateway
// moved them from vercel/xai/ to vercel/spacexai/, and the old ids are no
// longer served: VercelGrokBuild0_1, VercelGrok4_3 and
// VercelGrok4_20Reasoning keep their names and now hold the new ids.
const (
	// VercelGrokBuild0_1 is Grok Build 0.1 (vercel/xai/grok-build-0.1 before
	// the move).
	VercelGrokBuild0_1 Model = "vercel/spacexai/grok-build-0.1"
	// VercelGrok4_7 is Grok 4.7.
	VercelGrok4_7 Model = "vercel/spacexai/grok-4.7"
	// VercelGrok4_3 is Grok 4.3 (vercel/xai/grok-4.3 before the move).
	VercelGrok4_3 Model = "vercel/spacexai/grok-4.3"
	// VercelGrok4_20Reasoning is Grok 4.20 Reasoning
	// (vercel/xai/grok-4.20-reasoning before the move).
	VercelGrok4_20Reasoning Model = "vercel/spacexai/grok-4.20-reasoning"
)

// Models of the OpenCode harness (opencode/).
const (
	OpenCodeClaudeFable5     Model = "opencode/claude-fable-5"
	OpenCodeClaudeOpus5      Model = "opencode/claude-opus-5"
	OpenCodeClaudeOpus4_5    Model = "opencode/claude-opus-4-5"
	OpenCodeClaudeOpus4_6    Model = "opencode/claude-opus-4-6"
	OpenCodeClaudeOpus4_7    Model = "opencode/claude-opus-4-7"
	OpenCodeClaudeOpus4_8    Model = "opencode/claude-opus-4-8"
	OpenCodeClaudeOpus4_1    Model = "opencode/claude-opus-4-1"
	OpenCodeClaudeSonnet4    Model = "opencode/claude-sonnet-4"
	OpenCodeClaudeSonnet4_5  Model = "opencode/claude-sonnet-4-5"
	OpenCodeClaudeSonnet4_6  Model = "opencode/claude-sonnet-4-6"
	OpenCodeClaudeSonnet5    Model = "opencode/claude-sonnet-5"
	OpenCodeClaudeHaiku4_5   Model = "opencode/claude-haiku-4-5"
	OpenCodeGPT5_5           Model = "opencode/gpt-5.5"
	OpenCodeGPT5_4           Model = "opencode/gpt-5.4"
	OpenCodeGPT5_4Pro        Model = "opencode/gpt-5.4-pro"
	OpenCodeGPT5_4Mini       Model = "opencode/gpt-5.4-mini"
	OpenCodeGPT5_4Nano       Model = "opencode/gpt-5.4-nano"
	OpenCodeGPT5_3Codex      Model = "opencode/gpt-5.3-codex"
	OpenCodeGPT5_3CodexSpark Model = "opencode/gpt-5.3-codex-spark"
	OpenCodeGPT5_2Codex      Model = "opencode/gpt-5.2-codex"
	OpenCodeGPT5_1CodexMax   Model = "opencode/gpt-5.1-codex-max"
	OpenCodeGPT5_1CodexMini  Model = "opencode/gpt-5.1-codex-mini"
	OpenCodeGPT4_1           Model = "opencode/gpt-4.1"
	OpenCodeO3               Model = "opencode/o3"
	OpenCodeO4Mini           Model = "opencode/o4-mini"
	OpenCodeGPT5Nano         Model = "opencode/gpt-5-nano"
	OpenCodeBigPickle        Model = "opencode/big-pickle"
	OpenCodeMiniMaxM2_7      Model = "opencode/minimax-m2.7"
	OpenCodeGemini3_1Pro     Model = "opencode/gemini-3.1-pro"
	OpenCodeGemini3Pro       Model = "opencode/gemini-3-pro"
	OpenCodeGemini3Flash     Model = "opencode/gemini-3-flash"

	// OpenCodeClaudeFable5_1 is Claude Fable 5.1 in OpenCode.
	OpenCodeClaudeFable5_1 Model = "opencode/claude-fable-5-1"
	// OpenCodeClaudeOpus5_5 is Claude Opus 5.5 in OpenCode.
	OpenCodeClaudeOpus5_5 Model = "opencode/claude-opus-5-5"
	// OpenCodeGPT6_1Sol is GPT-6.1 Sol in OpenCode.
	OpenCodeGPT6_1Sol Model = "opencode/gpt-6.1-sol"
	// OpenCodeGPT6Astra is GPT-6 Astra in OpenCode.
	OpenCodeGPT6Astra Model = "opencode/gpt-6-astra"
	// OpenCodeGPT6Sol is GPT-6 Sol in OpenCode.
	OpenCodeGPT6Sol Model = "opencode/gpt-6-sol"
	// OpenCodeGPT6Luna is GPT-6 Luna in OpenCode.
	OpenCodeGPT6Luna Model = "opencode/gpt-6-luna"
)

// Models of the Cursor harness (cursor/).
const (
	CursorDefault          Model = "cursor/default"
	CursorComposer2_5      Model = "cursor/composer-2.5"
	CursorGPT5_5           Model = "cursor/gpt-5.5"
	CursorGPT5_4           Model = "cursor/gpt-5.4"
	CursorGPT5_4Mini       Model = "cursor/gpt-5.4-mini"
	CursorGPT5_4Nano       Model = "cursor/gpt-5.4-nano"
	CursorGPT5_3Codex      Model = "cursor/gpt-5.3-codex"
	CursorGPT5_3CodexSpark Model = "cursor/gpt-5.3-codex-spark"
	CursorGPT5_2           Model = "cursor/gpt-5.2"
	CursorGPT5_2Codex      Model = "cursor/gpt-5.2-codex"
	CursorGPT5_1           Model = "cursor/gpt-5.1"
	CursorGPT5_1CodexMax   Model = "cursor/gpt-5.1-codex-max"
	CursorGPT5_1CodexMini  Model = "cursor/gpt-5.1-codex-mini"
	CursorGPT5Mini         Model = "cursor/gpt-5-mini"
	CursorClaudeFable5     Model = "cursor/claude-fable-5"
	CursorClaudeOpus5      Model = "cursor/claude-opus-5"
	CursorClaudeOpus4_8    Model = "cursor/claude-opus-4-8"
	CursorClaudeOpus4_7    Model = "cursor/claude-opus-4-7"
	CursorClaudeOpus4_6    Model = "cursor/claude-opus-4-6"
	CursorClaudeOpus4_5    Model = "cursor/claude-opus-4-5"
	CursorClaudeSonnet4_6  Model = "cursor/claude-sonnet-4-6"
	CursorClaudeSonnet4_5  Model = "cursor/claude-sonnet-4-5"
	CursorClaudeSonnet4    Model = "cursor/claude-sonnet-4"
	CursorClaudeSonnet5    Model = "cursor/claude-sonnet-5"
	CursorClaudeHaiku4_5   Model = "cursor/claude-haiku-4-5"
	CursorGemini3_1Pro     Model = "cursor/gemini-3.1-pro"
	CursorGemini3Flash     Model = "cursor/gemini-3-flash"
	CursorGemini2_5Flash   Model = "cursor/gemini-2.5-flash"
	CursorGrok4_20         Model = "cursor/grok-4-20"
	CursorKimiK2_5         Model = "cursor/kimi-k2.5"

	// CursorClaudeOpus5_5 is Claude Opus 5.5 in Cursor.
	CursorClaudeOpus5_5 Model = "cursor/claude-opus-5-5"
)
