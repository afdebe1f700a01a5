"""Which ACL each znode zkcoord creates gets (Kafka's `ZkData.defaultAcls` under `zookeeper.set.acl`), and the
error a refused operation raises, naming the znode, the operation and the permission it lacked.

Kafka's rule: without `zookeeper.set.acl` everything is world-writable; with it, a znode gets all rights for
its creator's authenticated identities plus world read, except that `/consumers` itself stays open to everyone
(every old consumer creates its group below it) and the sensitive roots (`/config/users` with SCRAM
credentials, `/config/brokers`, `/delegation_tokens`) get no world read. Paths are chroot-relative, as Kafka's.
"""

from __future__ import annotations

from dataclasses import dataclass

from kazoo.exceptions import NoAuthError
from kazoo.security import ACL, CREATOR_ALL_ACL, OPEN_ACL_UNSAFE, READ_ACL_UNSAFE, Permissions

from zkcoord.errors import ZkcoordError

CONSUMERS_PATH = "/consumers"
SENSITIVE_ROOTS = ("/config/users", "/config/brokers", "/delegation_tokens")

# The permission ZooKeeper checks for each operation (and on which znode: creates and deletes are checked
# against the parent).
REQUIRED_PERMISSION = {
    "create": ("CREATE", "parent"),
    "delete": ("DELETE", "parent"),
    "set": ("WRITE", "node"),
    "get": ("READ", "node"),
    "get_children": ("READ", "node"),
    "get_acls": ("READ", "node"),
    "set_acls": ("ADMIN", "node"),
}
PERMISSION_NAMES = (
    (Permissions.READ, "READ"),
    (Permissions.WRITE, "WRITE"),
    (Permissions.CREATE, "CREATE"),
    (Permissions.DELETE, "DELETE"),
    (Permissions.ADMIN, "ADMIN"),
)


def sensitive_path(path: str) -> bool:
    """Kafka's `ZkData.sensitivePath`: a prefix match on the sensitive roots."""
    return any(path.startswith(root) for root in SENSITIVE_ROOTS)


@dataclass(frozen=True, slots=True)
class AclPolicy:
    """The ACLs for a created znode: `secure` is Kafka's `zookeeper.set.acl`."""

    secure: bool = False

    def acls_for(self, path: str) -> list[ACL]:
        if not self.secure or path == CONSUMERS_PATH:
            return list(OPEN_ACL_UNSAFE)
        if sensitive_path(path):
            return list(CREATOR_ALL_ACL)
        return list(CREATOR_ALL_ACL) + list(READ_ACL_UNSAFE)


OPEN = AclPolicy(secure=False)
KAFKA_SECURE = AclPolicy(secure=True)


def permission_names(perms: int) -> str:
    """'READ|WRITE' for a permission bit set (ZooKeeper's cdrwa as words)."""
    names = [name for bit, name in PERMISSION_NAMES if perms & bit]
    return "|".join(names) or "none"


def parent_of(path: str) -> str:
    parent = path.rsplit("/", 1)[0]
    return parent or "/"


class ZnodeAccessDenied(ZkcoordError, NoAuthError):  # type: ignore[misc]  # kazoo is untyped
    """ZooKeeper refused an operation because the znode's ACL does not grant this session's identity the
    permission it needs. Still a kazoo NoAuthError, so code that sorts ZooKeeper errors sorts it the same."""

    retriable = False

    def __init__(self, path: str, operation: str, identity: str) -> None:
        permission, on = REQUIRED_PERMISSION.get(operation, ("the required", "node"))
        target = parent_of(path) if on == "parent" else path
        super().__init__(
            f"ZooKeeper refused {operation} {path}: the ACL of {target} does not grant {permission} "
            f"permission to {identity}"
        )
        self.path = path
        self.operation = operation
        self.permission = permission
        self.acl_path = target
        self.identity = identity
