#!/bin/bash
set -e
cat > run.sh <<'SCRIPT'
#!/bin/bash
echo "build 4711 ok"
SCRIPT
chmod 644 run.sh
