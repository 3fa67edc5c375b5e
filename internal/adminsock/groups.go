package adminsock

import (
	"context"
	"fmt"
	"os/user"
	"slices"
	"strconv"
	"time"
)

// GroupDB is the user and group database administrator checks read. Both
// methods are called on every request that needs them, never cached, so
// that creating, renaming or deleting the group, or removing an account from
// it, takes effect at once.
type GroupDB interface {
	// GroupID returns the gid of the group called name.
	GroupID(name string) (uint32, error)
	// UserGroupIDs returns every gid the database lists uid as a member of,
	// including the account's primary group.
	UserGroupIDs(uid uint32) ([]uint32, error)
}

// SystemGroups is the system's database through os/user: NSS (files, LDAP,
// sssd, ...) when built with cgo, /etc/passwd and /etc/group otherwise.
type SystemGroups struct{}

// GroupID looks the group up by name.
func (SystemGroups) GroupID(name string) (uint32, error) {
	g, err := user.LookupGroup(name)
	if err != nil {
		return 0, err
	}
	return parseID(g.Gid)
}

// UserGroupIDs returns the account's primary group and every group whose
// member list names the account (getgrouplist, or /etc/group).
func (SystemGroups) UserGroupIDs(uid uint32) ([]uint32, error) {
	u, err := user.LookupId(strconv.FormatUint(uint64(uid), 10))
	if err != nil {
		return nil, err
	}
	ids, err := u.GroupIds()
	if err != nil {
		return nil, err
	}
	out := make([]uint32, 0, len(ids))
	for _, s := range ids {
		id, err := parseID(s)
		if err != nil {
			return nil, err
		}
		out = append(out, id)
	}
	return out, nil
}

func parseID(s string) (uint32, error) {
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("not a numeric id: %q", s)
	}
	return uint32(n), nil
}

// administrator decides whether the peer is a local administrator, and says
// why in words for the log:
//
//   - uid 0 is;
//   - with no admin group configured, nobody else is;
//   - otherwise the connecting process must hold the group (its effective
//     gid or one of its supplementary groups, as the kernel reported them at
//     connect time) AND the database must list the account as a member now.
//
// "Listed" includes the account's primary group in the user database, as
// getgrouplist and id(1) count it: that entry is read at request time too, so
// changing it takes effect at once just like editing the member list. The
// first condition is what makes membership behave like an elevated token:
// groups added with usermod -aG count only for processes started after the
// next sign-in (or under newgrp), and a process that dropped its groups does
// not count. A database that cannot answer within limit, or does not know
// the group or the account, makes the caller a standard account.
func administrator(ctx context.Context, id Identity, group string, db GroupDB, limit time.Duration) (bool, string) {
	if id.UID == 0 {
		return true, "root"
	}
	if group == "" {
		return false, "no admin group is configured; only root administers"
	}
	if !id.GroupsKnown {
		return false, "the kernel did not report the caller's groups"
	}
	type result struct {
		gid    uint32
		listed []uint32
		err    error
	}
	// The lookup runs on its own goroutine so that a hung NSS backend
	// costs the caller the limit, not the connection forever.
	ch := make(chan result, 1)
	go func() {
		var r result
		r.gid, r.err = db.GroupID(group)
		if r.err == nil {
			r.listed, r.err = db.UserGroupIDs(id.UID)
		}
		ch <- r
	}()
	t := time.NewTimer(limit)
	defer t.Stop()
	var r result
	select {
	case r = <-ch:
	case <-t.C:
		return false, fmt.Sprintf("the user and group database did not answer within %s", limit)
	case <-ctx.Done():
		return false, "the service is stopping"
	}
	if r.err != nil {
		return false, fmt.Sprintf("group %q or uid %d could not be looked up: %v", group, id.UID, r.err)
	}
	held := id.GID == r.gid || slices.Contains(id.Groups, r.gid)
	listed := slices.Contains(r.listed, r.gid)
	switch {
	case held && listed:
		return true, fmt.Sprintf("holds group %q and is listed in it", group)
	case held:
		return false, fmt.Sprintf("holds group %q but the database no longer lists the account", group)
	case listed:
		return false, fmt.Sprintf("listed in group %q but the process does not hold it (sign in again, or newgrp)", group)
	}
	return false, fmt.Sprintf("not a member of group %q", group)
}
