package box

// Schedule manages a box's cron schedules (UTC): shell commands and agent
// prompts that run on their own.
type Schedule struct{ b *Box }
