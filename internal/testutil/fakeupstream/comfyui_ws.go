package fakeupstream

// The /ws websocket: connecting clients and sending them events.

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/coder/websocket"
)

// ws is the /ws event stream. A clientId reuses (replaces) a session; none
// gets a fresh sid.
func (c *ComfyUI) ws(w http.ResponseWriter, r *http.Request) {
	conn, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
	if err != nil {
		return
	}
	conn.SetReadLimit(1 << 20)
	sid := r.URL.Query().Get("clientId")
	if sid == "" {
		sid = strings.ReplaceAll(newUUID(), "-", "")
	}
	sock := &comfySocket{sid: sid, conn: conn, out: make(chan []byte, 4096), done: make(chan struct{})}
	c.mu.Lock()
	old := c.sockets[sid]
	c.sockets[sid] = sock
	status := c.queueInfoLocked()
	lastNode, current := c.lastNode, c.clientID
	c.mu.Unlock()
	if old != nil {
		old.close()
	}
	go sock.writer()
	c.deliver(sock, "status", map[string]any{"status": status, "sid": sid})
	if current == sid && lastNode != nil {
		c.deliver(sock, "executing", map[string]any{"node": lastNode})
	}
	select {
	case <-c.done:
	default:
		for {
			if _, _, err := conn.Read(context.Background()); err != nil {
				break
			}
		}
	}
	sock.close()
	c.mu.Lock()
	if c.sockets[sid] == sock {
		delete(c.sockets, sid)
	}
	c.mu.Unlock()
}

func wsMessage(typ string, data any) []byte {
	b, _ := json.Marshal(map[string]any{"type": typ, "data": data})
	return b
}

// WSMessage is one message the fake sent on a /ws connection.
type WSMessage struct {
	Type string          `json:"type"`
	Data json.RawMessage `json:"data"`
}

// deliver queues one message on sock and records it.
func (c *ComfyUI) deliver(sock *comfySocket, typ string, data any) {
	msg := wsMessage(typ, data)
	var m WSMessage
	_ = json.Unmarshal(msg, &m)
	c.mu.Lock()
	c.sent[sock.sid] = append(c.sent[sock.sid], m)
	c.mu.Unlock()
	sock.enqueue(msg)
}

// Sent lists the messages the fake sent to a client id's /ws sessions, in
// order.
func (c *ComfyUI) Sent(clientID string) []WSMessage {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]WSMessage(nil), c.sent[clientID]...)
}

func (s *comfySocket) enqueue(b []byte) {
	select {
	case s.out <- b:
	case <-s.done:
	default:
	}
}

func (s *comfySocket) writer() {
	for {
		select {
		case b := <-s.out:
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			err := s.conn.Write(ctx, websocket.MessageText, b)
			cancel()
			if err != nil {
				s.close()
				return
			}
		case <-s.done:
			return
		}
	}
}

// send is PromptServer.send_sync: to sid, or to every socket when sid is
// empty and the event is broadcast (an event for a prompt queued without
// client_id goes to everyone).
func (c *ComfyUI) send(sid, event string, data any, broadcast bool) {
	if sid == "" && !broadcast {
		return
	}
	c.mu.Lock()
	var targets []*comfySocket
	if sid == "" {
		for _, s := range c.sockets {
			targets = append(targets, s)
		}
	} else if s, ok := c.sockets[sid]; ok {
		targets = append(targets, s)
	}
	c.mu.Unlock()
	for _, s := range targets {
		c.deliver(s, event, data)
	}
}
