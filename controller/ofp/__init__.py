"""OpenFlow adapter: the only package (with app.py) that imports Ryu."""
