package main

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// readmeRow is one row of the table of commands in README's "The box
// command" section: the commands it names, and the aliases and flags it
// gives them.
type readmeRow struct {
	line           int
	commands       []string
	aliases, flags []string
}

var (
	codeSpan    = regexp.MustCompile("`([^`]*)`")
	leadingFlag = regexp.MustCompile(`^(--?[A-Za-z][A-Za-z0-9-]*)`)
	commandWord = regexp.MustCompile(`^[a-z][a-z0-9-]*$`)
)

// readmeCommands reads the table of commands from the README's section
// on the box command: every row whose first cell names a command in
// backticks (`box ...`).
func readmeCommands(t *testing.T) []readmeRow {
	t.Helper()
	text, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatalf("reading the repository's README: %v", err)
	}
	_, section, ok := strings.Cut(string(text), "\n## The box command\n")
	if !ok {
		t.Fatal(`README has no section "## The box command"`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var rows []readmeRow
	for i, line := range strings.Split(section, "\n") {
		if !strings.HasPrefix(line, "|") {
			continue
		}
		// No cell of the table holds a "|" of its own.
		cells := strings.Split(strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(line), "|"), "|"), "|")
		if len(cells) < 3 {
			continue
		}
		row := readmeRow{line: i}
		for _, m := range codeSpan.FindAllStringSubmatch(cells[0], -1) {
			words := strings.Fields(m[1])
			if len(words) == 0 || words[0] != "box" {
				continue
			}
			path := []string{"box"}
			for _, w := range words[1:] {
				if !commandWord.MatchString(w) {
					break
				}
				path = append(path, w)
			}
			row.commands = append(row.commands, strings.Join(path, " "))
		}
		if len(row.commands) == 0 {
			continue
		}
		for _, m := range codeSpan.FindAllStringSubmatch(cells[1], -1) {
			row.aliases = append(row.aliases, m[1])
		}
		for _, m := range codeSpan.FindAllStringSubmatch(cells[2], -1) {
			if f := leadingFlag.FindString(m[1]); f != "" {
				row.flags = append(row.flags, f)
			}
		}
		rows = append(rows, row)
	}
	if len(rows) == 0 {
		t.Fatal(`README's section "The box command" has no table of commands`)
	}
	return rows
}

// TestREADMECommands: README's table of commands names every command of
// box, with exactly its aliases and its flags (long and short), and
// nothing box does not have; so the README stays the whole truth about
// the command line.
func TestREADMECommands(t *testing.T) {
	root := (&app{}).root()
	root.InitDefaultHelpCmd()
	cmds := map[string]*cobra.Command{}
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Hidden {
			return
		}
		cmds[c.CommandPath()] = c
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(root)

	seen := map[string]int{}
	for _, row := range readmeCommands(t) {
		for _, name := range row.commands {
			c, ok := cmds[name]
			if !ok {
				t.Errorf("README (row %q) names %q, which box does not have", row.commands, name)
				continue
			}
			if n, dup := seen[name]; dup && n != row.line {
				t.Errorf("README names %q in two rows", name)
			}
			seen[name] = row.line
			var flags []string
			c.LocalFlags().VisitAll(func(f *pflag.Flag) {
				if f.Hidden {
					return
				}
				flags = append(flags, "--"+f.Name)
				if f.Shorthand != "" {
					flags = append(flags, "-"+f.Shorthand)
				}
			})
			if got, want := sortedSet(row.flags), sortedSet(flags); !slices.Equal(got, want) {
				t.Errorf("README gives %q the flags %q; box has %q", name, got, want)
			}
			if got, want := sortedSet(row.aliases), sortedSet(c.Aliases); !slices.Equal(got, want) {
				t.Errorf("README gives %q the aliases %q; box has %q", name, got, want)
			}
		}
	}
	for name := range cmds {
		if _, ok := seen[name]; !ok {
			t.Errorf("README's table of commands does not name %q", name)
		}
	}
}

func sortedSet(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return slices.Compact(s)
}
