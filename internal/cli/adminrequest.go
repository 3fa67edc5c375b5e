package cli

// vacancyd admin-request --request FILE|- [--socket PATH] sends one admin
// request, the same JSON the owner console sends, over the local admin
// channel as the account that runs it. It exits with:
//
//	0  ExitOK               done; the service's answer is printed as JSON
//	40 ExitUntrustedServer  the socket's server (Windows: the pipe's) is not trusted; nothing sent
//	41 ExitRefused          the action needs an administrator
//	42 ExitStaleRevision    save_settings: the settings changed since read
//	43 ExitInvalidSettings  save_settings: the document is invalid (all problems printed)
//	44 ExitNoService        no service reachable (no socket or pipe, nothing listening)
//	45 ExitBadRequest       the request file is unreadable or not one valid request
//	46 ExitDeclined         Windows: the approval prompt was declined
//	47 ExitActionFailed     any other refusal (not_found, not_available, internal)
//	2  ExitUsage            bad flags
//
// Anything but success goes to standard error; standard output carries only
// the answer.

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/vacancyd/vacancyd/internal/admin"
	"github.com/vacancyd/vacancyd/internal/adminsock"
)

// adminRequestStdin is where --request - reads; tests replace it.
var adminRequestStdin io.Reader = os.Stdin

// adminRequestTimeout stops a hung exchange from hanging a script forever.
const adminRequestTimeout = 2 * time.Minute

func adminRequestFlags(fs *flag.FlagSet) func(context.Context, *env, []string) int {
	reqPath := fs.String("request", "", "file holding exactly one JSON request, or - for standard input (required)")
	sock := fs.String("socket", adminsock.DefaultPath, "the service's admin socket, when server.admin_socket is not the default (unused on Windows, which has the admin pipe)")
	return func(ctx context.Context, e *env, args []string) int {
		if !noArgs(e, "admin-request", args) {
			return ExitUsage
		}
		if *reqPath == "" {
			fmt.Fprintln(e.stderr, "vacancyd admin-request: --request FILE (or - for standard input) is required")
			return ExitUsage
		}
		return adminRequest(ctx, e, *reqPath, *sock)
	}
}

func adminRequest(ctx context.Context, e *env, reqPath, sock string) int {
	fail := func(code int, format string, args ...any) int {
		fmt.Fprintf(e.stderr, "vacancyd admin-request: "+format+"\n", args...)
		return code
	}
	req, err := readRequest(reqPath)
	if err != nil {
		return fail(ExitBadRequest, "%v", err)
	}
	// The file is checked here as the service would, so a bad one never
	// reaches it and the message names the problem.
	if _, err := admin.DecodeRequest(req); err != nil {
		return fail(ExitBadRequest, "%s: %v", requestName(reqPath), err)
	}

	ctx, cancel := context.WithTimeout(ctx, adminRequestTimeout)
	defer cancel()
	// The socket at sock, or on Windows the admin pipe (sock unused).
	conn, err := adminsock.DialChannel(ctx, sock)
	if err != nil {
		if adminsock.IsUntrusted(err) {
			return fail(ExitUntrustedServer, "%v; nothing was sent", err)
		}
		return fail(ExitNoService, "%v", err)
	}
	defer conn.Close()
	answer, err := conn.Exchange(ctx, req)
	if err != nil {
		return fail(ExitActionFailed, "%v", err)
	}
	refusal, err := admin.ParseResponse(answer)
	if err != nil {
		return fail(ExitActionFailed, "the service's answer is unreadable: %v", err)
	}
	if refusal != nil {
		for _, p := range refusal.Problems {
			fmt.Fprintf(e.stderr, "%s: %s\n", p.Key, p.Message)
		}
		return fail(refusalExit(refusal.Type), "refused (%s): %s", refusal.Type, refusal.Message)
	}
	_, _ = e.stdout.Write(answer)
	_, _ = io.WriteString(e.stdout, "\n")
	return ExitOK
}

// refusalExit maps the service's error type to admin-request's exit code.
func refusalExit(typ string) int {
	switch typ {
	case admin.ErrAdministratorRequired:
		return ExitRefused
	case admin.ErrStaleRevision:
		return ExitStaleRevision
	case admin.ErrInvalidSettings:
		return ExitInvalidSettings
	case admin.ErrInvalidRequest, admin.ErrUnknownAction, admin.ErrUnsupportedVersion:
		return ExitBadRequest
	}
	return ExitActionFailed
}

func requestName(p string) string {
	if p == "-" {
		return "standard input"
	}
	return p
}

// readRequest reads the request file, or standard input for "-", refusing
// more than a request may hold.
func readRequest(p string) ([]byte, error) {
	var r io.Reader
	if p == "-" {
		r = adminRequestStdin
	} else {
		f, err := os.Open(p)
		if err != nil {
			return nil, fmt.Errorf("read the request: %w", err)
		}
		defer f.Close()
		r = f
	}
	b, err := io.ReadAll(io.LimitReader(r, admin.MaxRequestBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read the request from %s: %w", requestName(p), err)
	}
	if len(b) > admin.MaxRequestBytes {
		return nil, fmt.Errorf("%s: the request is larger than %d bytes", requestName(p), admin.MaxRequestBytes)
	}
	return b, nil
}
