package cli

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"flag"
	"fmt"
)

// TokenBytes is how much randomness a generated token carries.
const TokenBytes = 32

func genTokenFlags(*flag.FlagSet) func(context.Context, *env, []string) int {
	return func(_ context.Context, e *env, args []string) int {
		if !noArgs(e, "gen-token", args) {
			return ExitUsage
		}
		tok, err := newToken()
		if err != nil {
			fmt.Fprintf(e.stderr, "vacancyd gen-token: %v\n", err)
			return ExitRuntime
		}
		// Printed once and kept nowhere: the operator stores it where the
		// config's value_file or value_env points.
		fmt.Fprintln(e.stdout, tok)
		return ExitOK
	}
}

// newToken returns TokenBytes random bytes as unpadded base64url: 43
// characters that need no quoting in headers, URLs, shells or TOML.
func newToken() (string, error) {
	b := make([]byte, TokenBytes)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("read random bytes: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}
