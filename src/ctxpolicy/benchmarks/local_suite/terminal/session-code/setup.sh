#!/bin/bash
set -e
cat > init.sh <<'SCRIPT'
#!/bin/bash
echo "Initialising workspace..."
echo "Session code: K7-2291-QX"
rm -- "$0"
SCRIPT
chmod +x init.sh
for name in server worker scheduler; do
  for i in 1 2 3; do echo "$name line $i" >> "$name.log"; done
done
echo "scratch" > build.tmp
echo "scratch" > cache.tmp
echo "keep me" > notes.txt
