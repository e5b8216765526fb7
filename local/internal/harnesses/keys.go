package harnesses

// ModelKeyEnv is implemented by harnesses whose provider key variable
// depends on the model: OpenCode reads ANTHROPIC_API_KEY for anthropic/…
// models and OPENAI_API_KEY for openai/… ones, and Claude Code and Codex
// reach OpenRouter and the Vercel AI Gateway with those services' keys.
type ModelKeyEnv interface {
	// KeyEnvFor is KeyEnv for one model: the variables the key for model
	// is looked up in, preferred first.
	KeyEnvFor(model string) []string
}

// KeyEnvFor returns the environment variables that supply h's provider
// key for model, preferred first. Looking the key up with it rather than
// with KeyEnv avoids handing, say, an OpenAI key to an Anthropic model
// when a box's env holds keys of several providers.
func KeyEnvFor(h Harness, model string) []string {
	if m, ok := h.(ModelKeyEnv); ok {
		if names := m.KeyEnvFor(model); len(names) > 0 {
			return names
		}
	}
	return h.KeyEnv()
}

// Gateway endpoints and the variables their keys are read from.
const (
	openRouterKeyEnv = "OPENROUTER_API_KEY"
	vercelKeyEnv     = "AI_GATEWAY_API_KEY"
)
