package desktop

import (
	"context"
	"encoding/json"
	"fmt"
	"math"

	"github.com/vacancyd/vacancyd/internal/admin"
	"github.com/vacancyd/vacancyd/internal/adminsock"
)

// Request is the report as the admin protocol's report_presence request.
func (r Report) Request() []byte {
	idle := math.Round(r.Idle.Seconds()*1000) / 1000
	if idle < 0 {
		idle = 0
	}
	inhibited := r.Inhibited
	b, _ := json.Marshal(admin.Request{ // cannot fail: plain values
		ProtocolVersion: admin.ProtocolVersion,
		Action: admin.Action{
			Kind:        admin.KindReportPresence,
			IdleSeconds: &idle,
			Source:      r.Source,
			Inhibited:   &inhibited,
		},
	})
	return b
}

// SocketSender sends reports over the admin channel at Path: the Linux
// admin socket, or the Windows admin pipe, through adminsock.Request, which
// checks who serves it before anything is sent.
type SocketSender struct {
	Path string
}

// Send delivers one report and returns the service's refusal, if any, as
// an error.
func (s SocketSender) Send(ctx context.Context, r Report) error {
	ctx, cancel := context.WithTimeout(ctx, callLimit)
	defer cancel()
	answer, err := adminsock.Request(ctx, s.Path, r.Request())
	if err != nil {
		return err
	}
	refusal, err := admin.ParseResponse(answer)
	if err != nil {
		return fmt.Errorf("the service's answer is unreadable: %w", err)
	}
	if refusal != nil {
		return fmt.Errorf("the service refused the report (%s): %s", refusal.Type, refusal.Message)
	}
	return nil
}
