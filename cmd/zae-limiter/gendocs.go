//go:build gendocs

package main

// Built with -tags gendocs (`make cli-docs`, go generate), the command has
// a hidden command `gen-cli-docs FILE` that rewrites the command reference
// in FILE (docs/cli.md) from the command tree.

import (
	"os"

	"github.com/spf13/cobra"
)

func init() {
	hiddenCommands = append(hiddenCommands, func(*cli) *cobra.Command {
		return &cobra.Command{
			Use:   "gen-cli-docs FILE",
			Short: "Rewrite the generated command reference in FILE",
			Args:  cobra.ExactArgs(1),
			RunE: func(_ *cobra.Command, args []string) error {
				doc, err := os.ReadFile(args[0])
				if err != nil {
					return err
				}
				out, err := updateReference(doc)
				if err != nil {
					return err
				}
				return os.WriteFile(args[0], out, 0o644)
			},
		}
	})
}
